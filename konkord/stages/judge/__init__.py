"""The judge stage: every pair judged blind in both orders, by one judge or by a cascade.

Owns: the single judge (judge), one judge call and its record (judge_call), what the judges owe a
run (owed: the calls, which are done or failed, the judge prompt on record), the closing tally
(judge_summary), the cascade's first pass and escalation (cascade), how its verdicts are read
(cascade_view), reported (cascade_report) and printed (cascade_print).

May import: stages.label, stages.check, stages.current, stages.run and every layer below stages.
"""
