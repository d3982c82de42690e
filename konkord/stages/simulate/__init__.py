"""The simulate stage: whole runs simulated with known truth, and what the ranking got right.

Owns: one simulated field and its scoring (simulate), sweeps over a setting (simulate_sweep),
and their summaries (simulate_summary).

May import: konkord.stats, konkord.errors and the layers below stages; no other stage.
"""
