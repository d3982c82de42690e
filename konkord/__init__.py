"""Konkord: rank language models with a pairwise LLM judge, and measure whether the judge can be trusted."""

__version__ = "0.1.0"
