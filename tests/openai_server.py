"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions API, for tests.

Tests reach it through litellm with `api_base=server.url`. A responder function decides each
reply, so a test can make the server slow, fail with 429 or 500, hang past a timeout, truncate
(finish_reason "length"), or send malformed JSON; every request body is recorded for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server sends for one request."""

    content: str | None = "ok"  # None: a reply with "content": null
    status: int = 200
    finish_reason: str = "stop"
    delay_s: float = 0.0
    raw_body: bytes | None = None  # sent verbatim instead of a JSON completion (garbage tests)
    prompt_tokens: int = 10
    completion_tokens: int = 5
    logprobs: list[dict[str, Any]] | None = None  # sent as choices[0].logprobs.content


def verdict_logprobs(content: str, probs: dict[str, float]) -> list[dict[str, Any]]:
    """Token log-probabilities for `content` as an OpenAI server sends them: word-like tokens
    with their leading space, and at the verdict value (the token after "VERDICT:") the
    alternatives " 1", " 2" and " TIE" carrying `probs`."""
    import math
    import re

    pieces = re.findall(r"\s*\w+|\s*[^\w\s]+|\s+", content)
    names = {"1": " 1", "2": " 2", "tie": " TIE"}
    top = [
        {"token": names[k], "logprob": math.log(p), "bytes": None}
        for k, p in sorted(probs.items(), key=lambda kv: -kv[1])
        if p > 0
    ]
    tokens = []
    for index, piece in enumerate(pieces):
        after_verdict = "".join(pieces[:index]).rstrip().upper().endswith("VERDICT:")
        if after_verdict:
            chosen = next(t for t in top if t["token"] == " " + piece.strip())
            tokens.append({**chosen, "top_logprobs": top})
        else:
            tokens.append({"token": piece, "logprob": -0.05, "bytes": None, "top_logprobs": []})
    return tokens


Responder = Callable[[dict[str, Any], int], Reply]


def echo_responder(body: dict[str, Any], n: int) -> Reply:
    """Answer with a short text derived from the last message."""
    last = body["messages"][-1]["content"]
    return Reply(content=f"answer to: {last[:60]}")


def user_text(body: dict[str, Any]) -> str:
    """All message contents of a request, joined: what the model saw."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


class OpenAIServer:
    """Start with `start()`, stop with `stop()`; `url` is the api_base to give litellm."""

    def __init__(self, responder: Responder = echo_responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    n = len(server.requests)
                reply = server.responder(body, n)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.raw_body is not None:
                    payload = reply.raw_body
                elif reply.status != 200:
                    payload = json.dumps(
                        {"error": {"message": f"status {reply.status}", "type": "test"}}
                    ).encode()
                else:
                    choice: dict[str, Any] = {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": reply.finish_reason,
                    }
                    if reply.logprobs is not None:
                        choice["logprobs"] = {"content": reply.logprobs}
                    payload = json.dumps(
                        {
                            "id": f"chatcmpl-{n}",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body.get("model", "test-model"),
                            "choices": [choice],
                            "usage": {
                                "prompt_tokens": reply.prompt_tokens,
                                "completion_tokens": reply.completion_tokens,
                                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                            },
                        }
                    ).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The api_base for litellm (OpenAI-style, ending in /v1)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def main() -> None:
    """Run the server standalone (for benchmarks):
    `python tests/openai_server.py PORT DELAY_S [verdict]`; with `verdict` every reply ends in a
    verdict line, so that a judge can be benchmarked against it too."""
    import sys

    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    tail = "\nVERDICT: 1" if sys.argv[3:4] == ["verdict"] else ""
    server = OpenAIServer(lambda body, n: Reply(content=f"reply {n}{tail}", delay_s=delay))
    server._httpd.server_address  # noqa: B018
    print(server.url, flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":
    main()
