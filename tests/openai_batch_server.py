"""A local fake of OpenAI's files and batches endpoints, plus chat completions, for tests.

litellm's real batch functions (create_file, create_batch, retrieve_batch, file content) talk to
it over HTTP with `api_base=server.url`. A batch moves validating -> in_progress -> completed, one
step per status read; on completion every request line is answered by the same responder as the
live endpoint: status 200 goes to the output file, anything else to the error file. Files live on
disk, so a benchmark of 100,000 requests does not measure the fake's memory.

`hold` keeps batches in_progress (a test kills the client there); `expire_after` lets a batch
answer only that many lines and expire the rest, as a real 24 h window can.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openai_server import Reply, echo_responder

Responder = Callable[[dict[str, Any], int], Reply]


def completion_body(body: dict[str, Any], n: int, reply: Reply) -> dict[str, Any]:
    """The chat.completion object the server returns for one request."""
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "test-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _multipart_file(content_type: str, body: bytes) -> tuple[bytes, str]:
    """The uploaded file's bytes and the `purpose` field from a multipart/form-data body."""
    found = re.search(r'boundary="?([^";]+)"?', content_type)
    if not found:
        raise ValueError("no multipart boundary")
    boundary = b"--" + found.group(1).encode()
    data, purpose = b"", ""
    for part in body.split(boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, value = part.partition(b"\r\n\r\n")
        value = value[: -2] if value.endswith(b"\r\n") else value
        if b'name="file"' in head:
            data = value
        elif b'name="purpose"' in head:
            purpose = value.decode()
    return data, purpose


class BatchServer:
    """Start with `start()`, stop with `stop()`; `url` is the api_base for litellm."""

    def __init__(self, responder: Responder = echo_responder, directory: Path | None = None) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []  # every chat request answered, live or batched
        self.batch_creates: list[dict[str, Any]] = []  # every POST /v1/batches body
        self.uploads = 0
        self.hold = False
        self.expire_after: int | None = None
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.statuses: dict[str, list[str]] = {}  # batch id -> the status every read showed
        self._shown_running: set[str] = set()
        self._tmp = tempfile.TemporaryDirectory(prefix="fake-openai-files-")
        self.directory = directory or Path(self._tmp.name)
        self._lock = threading.Lock()
        self._counter = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: bytes | Path, kind: str = "application/json") -> None:
                size = payload.stat().st_size if isinstance(payload, Path) else len(payload)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    if isinstance(payload, Path):
                        with open(payload, "rb") as handle:
                            while chunk := handle.read(1 << 20):
                                self.wfile.write(chunk)
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _json(self, status: int, obj: Any) -> None:
                self._send(status, json.dumps(obj).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/files"):
                    data, purpose = _multipart_file(self.headers.get("Content-Type", ""), raw)
                    self._json(200, server._store_file(data, purpose))
                elif path.endswith("/batches"):
                    body = json.loads(raw or b"{}")
                    created = server._create_batch(body)
                    self._json(200 if created.get("object") == "batch" else 404, created)
                elif path.endswith("/chat/completions"):
                    body = json.loads(raw or b"{}")
                    reply, n = server._answer(body)
                    if reply.status != 200:
                        error = {"error": {"message": f"status {reply.status}", "type": "test"}}
                        self._json(reply.status, error)
                    else:
                        self._json(200, completion_body(body, n, reply))
                else:
                    self._json(404, {"error": {"message": f"no route {path}"}})

            def do_GET(self) -> None:
                path = self.path.split("?")[0].rstrip("/")
                parts = path.split("/")
                if parts[-1] == "batches":
                    listed = [dict(b) for b in reversed(list(server.batches.values()))]
                    self._json(200, {"object": "list", "data": listed, "has_more": False})
                elif len(parts) >= 2 and parts[-2] == "batches":
                    batch = server._poll(parts[-1])
                    if batch is None:
                        self._json(404, {"error": {"message": "no such batch"}})
                    else:
                        self._json(200, batch)
                elif parts[-1] == "content" and parts[-3] == "files":
                    stored = server.files.get(parts[-2])
                    if stored is None:
                        self._json(404, {"error": {"message": "no such file"}})
                    else:
                        self._send(200, stored["path"], "application/octet-stream")
                elif len(parts) >= 2 and parts[-2] == "files" and parts[-1] in server.files:
                    self._json(200, server.files[parts[-1]]["object"])
                else:
                    self._json(404, {"error": {"message": f"no route {path}"}})

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # --- state -----------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}-{self._counter}"

    def _store_file(self, data: bytes, purpose: str, name: str = "input.jsonl") -> dict[str, Any]:
        file_id = self._next_id("file")
        path = self.directory / file_id
        path.write_bytes(data)
        return self._register_file(file_id, path, purpose, name)

    def _register_file(self, file_id: str, path: Path, purpose: str, name: str) -> dict[str, Any]:
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": path.stat().st_size,
            "created_at": 0,
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }
        with self._lock:
            if purpose == "batch":
                self.uploads += 1
            self.files[file_id] = {"path": path, "object": obj}
        return obj

    def _answer(self, body: dict[str, Any]) -> tuple[Reply, int]:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
        return self.responder(body, n), n

    def _create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("input_file_id") not in self.files:
            return {"error": {"message": "no such input file"}}
        batch_id = self._next_id("batch")
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": 0,
            "metadata": body.get("metadata"),
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
        }
        with self._lock:
            self.batch_creates.append(body)
            self.batches[batch_id] = batch
        return dict(batch)

    def _poll(self, batch_id: str) -> dict[str, Any] | None:
        """One status read, which moves the batch one step on: the first read shows validating,
        the next in_progress (as long as `hold` is set), the one after that completed."""
        batch = self.batches.get(batch_id)
        if batch is None:
            return None
        shown = dict(batch)
        if batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif batch["status"] == "in_progress" and batch_id in self._shown_running and not self.hold:
            self._run(batch)
            shown = dict(batch)
        if shown["status"] == "in_progress":
            self._shown_running.add(batch_id)
        self.statuses.setdefault(batch_id, []).append(shown["status"])
        return shown

    def _run(self, batch: dict[str, Any]) -> None:
        """Answer every line of the input file, writing the output and error files."""
        source = self.files[batch["input_file_id"]]["path"]
        out_id, err_id = self._next_id("file"), self._next_id("file")
        out_path, err_path = self.directory / out_id, self.directory / err_id
        total = done = failed = 0
        with open(source, "rb") as lines, open(out_path, "wb") as out, open(err_path, "wb") as err:
            for line in lines:
                if not line.strip():
                    continue
                request = json.loads(line)
                total += 1
                line_id = f"batch_req_{total}"
                if self.expire_after is not None and total > self.expire_after:
                    failed += 1
                    error = {"code": "batch_expired", "message": "not completed in time"}
                    entry = {"id": line_id, "custom_id": request["custom_id"], "response": None,
                             "error": error}
                    err.write(json.dumps(entry).encode() + b"\n")
                    continue
                reply, n = self._answer(request["body"])
                response: dict[str, Any] = {"status_code": reply.status, "request_id": f"req-{n}"}
                if reply.status == 200:
                    done += 1
                    response["body"] = completion_body(request["body"], n, reply)
                    target = out
                else:
                    failed += 1
                    response["body"] = {
                        "error": {"message": f"status {reply.status}", "type": "test"}
                    }
                    target = err
                entry = {"id": line_id, "custom_id": request["custom_id"], "response": response,
                         "error": None}
                target.write(json.dumps(entry).encode() + b"\n")
        self._register_file(out_id, out_path, "batch_output", "output.jsonl")
        self._register_file(err_id, err_path, "batch_output", "errors.jsonl")
        batch["status"] = "expired" if self.expire_after is not None else "completed"
        batch["output_file_id"] = out_id if done else None
        batch["error_file_id"] = err_id if failed else None
        batch["request_counts"] = {"total": total, "completed": done, "failed": failed}

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The api_base for litellm (OpenAI-style, ending in /v1)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> BatchServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._tmp.cleanup()


def standalone_reply(body: dict[str, Any], n: int) -> Reply:
    """A reply fixed by the request (its model and messages), so that the README's worked
    example prints the same on every run; it ends with a verdict line, so it can stand in for
    models and a judge alike."""
    digest = hashlib.sha256(json.dumps([body.get("model"), body.get("messages")]).encode())
    code = digest.hexdigest()
    return Reply(content=f"Reply {code[:8]}.\nVERDICT: {1 + int(code[8], 16) % 2}")


def main() -> None:
    """Run standalone: `python tests/openai_batch_server.py [PORT]`; prints its url."""
    import sys

    server = BatchServer(standalone_reply)
    if len(sys.argv) > 1:
        server._httpd.server_close()
        handler = server._httpd.RequestHandlerClass
        server._httpd = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler)
        server._httpd.daemon_threads = True
    print(server.url, flush=True)
    try:
        server._httpd.serve_forever()
    finally:
        server._tmp.cleanup()
        sys.exit(0)


if __name__ == "__main__":
    main()
