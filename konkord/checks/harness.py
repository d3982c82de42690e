"""The trusted side of a `tests` check: run the task's tests and decide whether they passed.

Runs outside the sandbox as `python -I -B harness.py REQUESTS REPLIES STATUS TESTS_FILE`. The
answer's names arrive from the sandboxed worker as plain data or as handles (`wire.Remote`), so
the tests call the answer's functions across the line and compare what comes back, plain data
only, here. The verdict is written to STATUS, a descriptor only this process holds.
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


def answer_names(channel: wire.Channel, status_fd: int) -> dict[str, Any]:
    """The names the answer defined, once its code ran; reports and exits when it did not."""
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
        # A name of the builtins (len, all, isinstance, ValueError...) stays the builtin: the
        # answer does not get to redefine what the tests use to check it.
        return {str(name): channel.decode(value) for name, value in names.items()
                if str(name).isidentifier() and not hasattr(builtins, str(name))}
    except wire.ProtocolError as exc:
        report(status_fd, {"ok": False, "broken": str(exc)[:300],
                           "closed": isinstance(exc, wire.Closed)})


def main() -> None:
    requests, replies, status_fd = (int(a) for a in sys.argv[1:4])
    with open(sys.argv[4]) as handle:
        tests = handle.read()
    channel = wire.Channel(os.fdopen(replies, "rb"), os.fdopen(requests, "wb"), trusted=True)
    namespace: dict[str, Any] = {"__name__": "__konkord_tests__"}
    namespace.update(answer_names(channel, status_fd))
    try:
        exec(compile(tests, "tests.py", "exec"), namespace)
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
