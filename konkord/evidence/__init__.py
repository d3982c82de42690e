"""The evidence log and what keeps it whole: append-only records, atomic
writes, paths kept inside the project, the writer lock and Ctrl-C, verdicts read back.
"""
