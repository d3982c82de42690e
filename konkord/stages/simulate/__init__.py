"""The simulate stage: simulated fields, sweeps and their summaries.
"""
