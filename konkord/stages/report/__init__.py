"""The report stage: the results file computed from the evidence, and its printout.

Owns: the results file built (report), the ranking and judge blocks (report_ranking), each turn's own ranking
(report_turns), anchored
estimates with people's labels (report_anchored), per-task views (task_source, made in a worker process by task_worker), cost and pass rates
(report_views), the judge panel
(judges), the freshness digest (freshness), and the terminal printouts (report_print,
judges_print).

May import: stages.calibrate and every stage below it, and every layer below stages.
"""
