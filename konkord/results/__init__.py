"""The results file (results/<run>.json) and what is derived from it without the statistics.

Owns: the versioned schema (schema, with base, judging and tasks), a large run's tasks in a file
each beside it (files), the stamps that let an unchanged `konkord build` (buildstamp) and
`konkord report` (reportstamp) answer at once, and the judge table's rows (judges_table), light
on purpose so that the site and the terminal share them.

May import: konkord.configuration, konkord.evidence, konkord.errors. Never stats (numpy), the
site, providers or stages: the site and the quick paths import this without paying for them.
"""
