"""Importers: published human-labelled comparison sets turned into Konkord runs.

An imported run holds the same evidence a native run does (suite, manifest, answers, verdicts,
labels), so `report`, `calibrate` and `judge` work on it unchanged and a new judge can be set
beside the published one on the same pairs.

Modules:
    mtbench           the MT-Bench human judgments (lmsys/mt_bench_human_judgments): writes the run
    mtbench_read      reads its published files into votes and conversations
    mtbench_records   turns votes and conversations into evidence records

May import: konkord.stages (the answer frame of stages.run) and every layer below it.
Only konkord.commands imports this.
"""
