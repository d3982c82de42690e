"""One check of one answer: extract the code, run the check, explain a failure in one line."""

from __future__ import annotations

import time

from konkord.checks import CheckResult
from konkord.checks.extract import NO_CODE_REASON, extract_code
from konkord.checks.sandbox import Limits, ProgramRun, run_program
from konkord.checks.static import check_compiles, check_mypy, check_ruff
from konkord.configuration.suite import Task

SIGXCPU = 24
SIGKILL = 9


def run_check(
    check: str,
    task: Task,
    answer_text: str | None,
    language: str | None,
    limits: Limits | None = None,
    sandbox: str = "bwrap",
) -> CheckResult:
    """Run one named check (compiles, ruff_clean, mypy_clean, tests) on one answer."""
    code = extract_code(answer_text, language)
    if code.empty:
        kind = "static" if check != "tests" else sandbox
        return CheckResult(check, False, NO_CODE_REASON, "", 0.0, kind)
    if check == "compiles":
        return check_compiles(code.code)
    if check == "ruff_clean":
        return check_ruff(code.code)
    if check == "mypy_clean":
        return check_mypy(code.code)
    if check == "tests":
        return run_tests(code.code, task.tests or "", limits or Limits(), sandbox)
    raise ValueError(f"unknown check {check!r}")


def run_tests(code: str, tests: str, limits: Limits, sandbox: str) -> CheckResult:
    """Run a task's tests after the answer's code, in one namespace, inside the sandbox."""
    start = time.monotonic()
    run = run_program(code, tests, limits, sandbox)
    reason = failure_reason(run, limits)
    return CheckResult(
        "tests", reason is None, reason, run.output, time.monotonic() - start, sandbox
    )


def _exit_signal(returncode: int | None) -> int | None:
    """The signal that ended the program: negative codes directly, bwrap's 128+N otherwise."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if returncode > 128:
        return returncode - 128
    return None


def failure_reason(run: ProgramRun, limits: Limits) -> str | None:
    """Why a test run failed, naming the limit it hit when it hit one; None when it passed."""
    if run.timed_out:
        return f"wall-time limit: still running after {limits.wall_s:g} s, killed"
    if run.output_exceeded:
        return f"output limit: wrote more than {limits.output_bytes} bytes, killed"
    status = run.status
    if status is None or status.get("closed"):
        # The answer's process ended on its own (or the harness could not say why): its
        # exit status names the limit it hit.
        signal_number = _exit_signal(run.returncode)
        if signal_number == SIGXCPU:
            return f"CPU-time limit: used more than {limits.cpu_s} s of CPU, killed"
        if signal_number == SIGKILL:
            return "killed (SIGKILL) before the tests finished"
        if signal_number is not None:
            return f"killed by signal {signal_number} before the tests finished"
        if status is None:
            return "the test harness stopped without a verdict"
        return f"exited (status {run.returncode}) before the tests finished"
    if status.get("broken"):
        return str(status["broken"])
    if status.get("ok") is True:
        return None
    error = str(status.get("error"))
    message = str(status.get("message") or "")
    where = "the answer's code" if status.get("stage") == "answer.py" else "the tests"
    if error == "MemoryError":
        return f"memory limit: {where} ran out of its {limits.memory_mb} MB (MemoryError)"
    if error == "BlockingIOError" and "temporarily unavailable" in message:
        return f"process-count limit: {where} could not start a process ({message})"
    if error == "SystemExit":
        return f"{where} called exit({message}) before the tests finished"
    if error == "AssertionError" and status.get("stage") == "tests.py":
        detail = f": {message}" if message else ""
        return f"test failed at tests.py line {status.get('line')}: {status.get('text')}{detail}"
    detail = f": {message}" if message else ""
    if status.get("line") is not None:
        who = "in the tests" if status.get("stage") == "tests.py" else "from the answer's code"
        return f"{error} {who} at tests.py line {status.get('line')}: {status.get('text')}{detail}"
    return f"{where} raised {error}{detail}"
