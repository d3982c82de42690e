"""Checks of code answers: static ones that only read the code, and `tests`, which runs it.

`run_check(check, task, answer_text, language, limits, sandbox)` in `konkord.checks.runner` is the
one entry point; every check returns a `CheckResult` that the check stage stores as a record.

May import: konkord.configuration (the suite's tasks), konkord.errors. Never providers or
stages: the stage that runs checks is konkord.stages.check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OUTPUT_KEEP = 4000  # characters of captured output kept in the evidence log


@dataclass(frozen=True)
class CheckResult:
    """One check of one answer: did it pass, why not, and what the tool or program printed."""

    check: str
    passed: bool
    reason: str | None
    output: str
    duration_s: float
    sandbox: str  # "bwrap" | "none" | "static"

    def to_record(self) -> dict[str, Any]:
        """The fields of a `checks` evidence record that this result fills."""
        return {
            "check": self.check,
            "passed": self.passed,
            "reason": self.reason,
            "output": truncate(self.output),
            "duration_s": round(self.duration_s, 3),
            "sandbox": self.sandbox,
        }


def truncate(text: str, keep: int = OUTPUT_KEEP) -> str:
    """The head and tail of long output, so both the first error and the last line survive."""
    if len(text) <= keep:
        return text
    half = keep // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"
