"""The sandboxed side of a `tests` check: run the answer's code, then serve calls from the tests.

Runs inside bubblewrap as `python -I -B worker.py REQUESTS REPLIES RLIMITS`, next to wire.py
(with plain.py and remote.py) and answer.py. It applies the resource limits, executes the
answer, tells the tests which names the answer defined, and then carries out each call the
tests make. Nothing here decides whether the tests passed: the answer's code could rewrite
every line of this file while it runs.
"""

from __future__ import annotations

import os
import resource
import sys
import traceback
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if TYPE_CHECKING:
    from konkord.checks import plain, wire
else:
    import plain
    import wire


def main() -> None:
    requests, replies = int(sys.argv[1]), int(sys.argv[2])
    rlimits: dict[str, list[int]] = plain.loads(sys.argv[3])  # type: ignore[assignment]
    for name, (soft, hard) in rlimits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "answer.py")) as handle:
        source = handle.read()
    channel = wire.Channel(os.fdopen(requests, "rb"), os.fdopen(replies, "wb"), trusted=False)
    namespace: dict[str, Any] = {"__name__": "__konkord_answer__"}
    pid = os.getpid()
    try:
        exec(compile(source, "answer.py", "exec"), namespace)
    except BaseException as exc:
        if os.getpid() != pid:
            os._exit(1)  # a forked child of the answer: only the worker reports
        traceback.print_exc()
        channel.send({"op": "failed", "types": [c.__name__ for c in type(exc).__mro__],
                      "message": str(exc)[:300]})
        sys.stdout.flush()
        os._exit(1)
    if os.getpid() != pid:
        os._exit(0)
    names = {}
    for name, value in namespace.items():
        if name.startswith("__") and name.endswith("__"):
            continue
        try:
            names[name] = channel.encode(value)
        except (ValueError, TypeError, RecursionError):
            names[name] = channel.encode(object())
    channel.send({"op": "ready", "names": names})
    channel.serve_forever()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
