"""The trusted side of a `tests` check: run the task's tests and decide whether they passed.

Runs outside the sandbox as `python -I -B harness.py REQUESTS REPLIES STATUS TESTS_FILE`. The
answer's names arrive from the sandboxed worker as plain data or as handles (`remote.Remote`), so
the tests call the answer's functions across the line and compare what comes back, plain data
only, here. The tests run with this process's own builtins and see, of the answer's names,
only those they use and never a dunder (a sent `__builtins__` would fake every check). The
verdict is written to STATUS, a descriptor only this process holds.
"""

from __future__ import annotations

import builtins
import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs every check a few milliseconds
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from konkord.checks import plain, wire
else:
    import plain
    import wire


def report(status_fd: int, status: dict[str, Any]) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.write(status_fd, plain.dumps(status).encode())
    os._exit(0)


def names_used(code: Any) -> set[str]:
    """Every global or free name the tests' code (and the code nested in it) refers to."""
    used = set(code.co_names)
    for constant in code.co_consts:
        if type(constant) is type(code):
            used |= names_used(constant)
    return used


def answer_names(channel: wire.Channel, status_fd: int, wanted: set[str]) -> dict[str, Any]:
    """The names the answer defined that the tests use, once its code ran; reports and exits
    when it did not run."""
    try:
        first = channel.receive()
        if first["op"] == "failed":
            types = first.get("types")
            error = str(types[0])[:60] if isinstance(types, list) and types else "Exception"
            report(status_fd, {"ok": False, "stage": "answer.py", "error": error,
                               "message": str(first.get("message", ""))[:300]})
        names = first.get("names")
        if first["op"] != "ready" or type(names) is not dict:
            raise wire.ProtocolError("the answer's side did not say it was ready")
        # Only names the tests use, never a dunder (`__builtins__` would replace every builtin
        # the tests call) and never a builtin's name (len, all, isinstance, ValueError...): the
        # answer does not get to redefine what the tests use to check it.
        return {name: channel.decode(value) for name, value in names.items()
                if name in wanted and not name.startswith("_")
                and not hasattr(builtins, name)}
    except wire.ProtocolError as exc:
        report(status_fd, {"ok": False, "broken": str(exc)[:300],
                           "closed": isinstance(exc, wire.Closed)})


def main() -> None:
    requests, replies, status_fd = (int(a) for a in sys.argv[1:4])
    with open(sys.argv[4]) as handle:
        tests = handle.read()
    channel = wire.Channel(os.fdopen(replies, "rb"), os.fdopen(requests, "wb"), trusted=True)
    try:
        code = compile(tests, "tests.py", "exec")
    except SyntaxError as exc:
        report(status_fd, {"ok": False, "stage": "tests.py", "error": "SyntaxError",
                           "message": str(exc.msg)[:300], "line": exc.lineno,
                           "text": (exc.text or "").strip()[:300]})
    namespace = answer_names(channel, status_fd, names_used(code))
    # The tests' builtins are this process's own, whatever the answer sent.
    namespace.update(__name__="__konkord_tests__", __builtins__=builtins)
    try:
        exec(code, namespace)
    except BaseException as exc:
        import traceback

        if channel.broken is not None:
            report(status_fd, {"ok": False, "broken": channel.broken,
                               "closed": channel.closed})
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename == "tests.py":
                line = frame.lineno
        text = tests.splitlines()[line - 1].strip() if line is not None else None
        traceback.print_exc()
        stage = "answer.py" if getattr(exc, "konkord_remote", False) else "tests.py"
        report(status_fd, {"ok": False, "stage": stage, "error": type(exc).__name__,
                           "message": str(exc)[:300], "line": line, "text": text})
    if channel.broken is not None:  # the tests caught the error, but the check is broken
        report(status_fd, {"ok": False, "broken": channel.broken, "closed": channel.closed})
    report(status_fd, {"ok": True})


if __name__ == "__main__":
    main()
