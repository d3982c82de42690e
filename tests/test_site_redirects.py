"""Every folder page answers its address typed without the trailing slash, on a server that
applies public/_redirects as Cloudflare's Workers static assets do (html_handling "none": a
file is served only under its own name; not_found_handling "404-page").

The rules engine below follows Cloudflare's documented semantics: static rules (no splat, no
placeholder) are matched exactly and first, the rest in order; `*` is a splat, `:name` one path
segment; a 200 serves the destination's file at the same address, 301/302 redirect.
"""

from __future__ import annotations

import functools
import http.client
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures_site import build_standard_site


def compile_rules(text: str) -> tuple[dict[str, tuple[str, int]], list[tuple[re.Pattern[str], str, int]]]:
    static: dict[str, tuple[str, int]] = {}
    dynamic: list[tuple[re.Pattern[str], str, int]] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        source, target, status = parts[0], parts[1], int(parts[2]) if len(parts) > 2 else 302
        if "*" not in source and ":" not in source:
            static.setdefault(source, (target, status))
            continue
        pattern = re.escape(source).replace(r"\*", "(?P<splat>.*)")
        pattern = re.sub(r":([A-Za-z]\w*)", r"(?P<\1>[^/]+)", pattern)
        dynamic.append((re.compile(f"^{pattern}$"), target, status))
    return static, dynamic


class CloudflareLike(http.server.SimpleHTTPRequestHandler):
    rules: tuple[dict[str, tuple[str, int]], list[tuple[re.Pattern[str], str, int]]]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _apply(self, path: str) -> tuple[str, int] | None:
        static, dynamic = self.rules
        if path in static:
            return static[path]
        for pattern, target, status in dynamic:
            found = pattern.match(path)
            if found:
                for name, value in found.groupdict().items():
                    target = target.replace(f":{name}", value)
                return target, status
        return None

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        rule = self._apply(path)
        if rule is not None and rule[1] in (301, 302):
            self.send_response(rule[1])
            self.send_header("Location", rule[0])
            self.end_headers()
            return
        served = rule[0] if rule is not None else path
        local = Path(self.directory) / served.lstrip("/")
        if served.endswith("/") or not local.is_file():  # html_handling "none"
            body = (Path(self.directory) / "404.html").read_bytes()
            self.send_response(404)
        else:
            body = local.read_bytes()
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    root = tmp_path_factory.mktemp("redirects")
    build_standard_site(root)
    public = root / "public"
    handler = type(
        "Handler", (CloudflareLike,), {"rules": compile_rules((public / "_redirects").read_text())}
    )
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(public))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield public, server.server_address[1]
    server.shutdown()
    server.server_close()


def get(port: int, path: str) -> tuple[int, str | None]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    return response.status, response.getheader("Location")


def test_every_folder_page_answers_with_and_without_its_slash(served: tuple[Path, int]) -> None:
    public, port = served
    folders = sorted(
        "/" + p.parent.relative_to(public).as_posix()
        for p in public.rglob("index.html")
        if p.parent != public
    )
    assert any("/tasks/" in folder for folder in folders), "the fixture has task pages"
    for folder in folders:
        assert get(port, folder) == (301, folder + "/"), folder
        assert get(port, folder + "/")[0] == 200, folder
        assert get(port, folder + "/index.html")[0] == 200, folder
    assert get(port, "/")[0] == 200
    assert get(port, "/index.html")[0] == 200
    assert get(port, "/static/site.css")[0] == 200
    assert get(port, "/no-such-run")[0] == 404


def test_past_cloudflares_limit_the_shallowest_folders_keep_their_redirect() -> None:
    from konkord.site.generate import MAX_FOLDER_REDIRECTS, redirects

    outputs = ["index.html", "run/index.html", "run/calibration/index.html"] + [
        f"run/tasks/t{k:05d}/index.html" for k in range(MAX_FOLDER_REDIRECTS + 50)
    ]
    static, _ = compile_rules(redirects(outputs))
    slashless = [source for source, (_, status) in static.items() if status == 301]
    assert len(slashless) == MAX_FOLDER_REDIRECTS
    assert {"/run", "/run/calibration"} <= set(slashless)
