"""The evidence: the append-only log of a run and what keeps it whole.

Owns: the log (log: runs/<run>/<stream>.jsonl, locked and fsynced appends, torn lines cut away),
whole-file writes a crash cannot tear (atomic), paths that never leave the project (paths), one
writer per run and a Ctrl-C that keeps what was paid for (stopping), the judges' verdicts read
back and combined per pair (verdicts), the verdict log read into columns (parse, verdict_build,
verdict_rows, verdict_table; in two processes where it is large: verdict_split; kept between
commands in .konkord/columns: verdict_saved), and what konkord's worker processes share
(workers).

May import: konkord.errors only. Everything else in konkord may import this.
"""
