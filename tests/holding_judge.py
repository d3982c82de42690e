"""A judge behind `openai_server` that answers the first calls and holds the rest: for tests that
kill a judging, or one of its workers, while calls are in flight."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from openai_server import Reply, Responder


class HoldingJudge:
    """Answers the first `quick` requests with `reply`, then holds the rest until `release` is
    set: then 503 (the client that asked is gone, so nothing was delivered), or `reply` where
    `answer_held` is set. `on_hold`, if set, is called as each request is held. Every answered
    call is counted in `paid` by its messages, to show none was paid twice."""

    def __init__(self, quick: int, reply: Responder) -> None:
        self.quick = quick
        self.reply = reply
        self.release = threading.Event()
        self.paid: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.on_hold: Callable[[], None] | None = None
        self.answer_held = False

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        if n > self.quick and not self.release.is_set():
            if self.on_hold is not None:
                self.on_hold()
            self.release.wait(60)
            if not self.answer_held:
                return Reply(status=503)
        with self.lock:
            self.paid[json.dumps(body["messages"], sort_keys=True)] += 1
        return self.reply(body, n)
