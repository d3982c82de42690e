"""`konkord serve` as a user runs it: a subprocess, a content edit, a broken template."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fixtures_site import make_results, write_project

from konkord.site.environment import REVEAL_JS, SCRIPT_SRC

# Only guards against a hang: how fast a rebuild is served is a benchmark's figure, not a
# test's (on the shared 2-core machine a 2 s deadline failed under load).
HANG_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def poll(url: str, until: Callable[[int, str], bool], deadline: float) -> tuple[int, str]:
    """Fetch until `until` holds or the deadline passes; returns the last response."""
    end = time.monotonic() + deadline
    while True:
        try:
            status, body = fetch(url)
        except OSError:
            status, body = 0, ""
        if until(status, body) or time.monotonic() > end:
            return status, body
        time.sleep(0.05)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    write_project(tmp_path, [make_results("one", models=["m/a", "m/b"], judges=["j/x"], n_tasks=2)])
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "konkord.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    status, _ = poll(f"{base}/__konkord/build", lambda s, _: s == 200, 30)
    assert status == 200, "server did not start"
    yield base, tmp_path, process
    process.terminate()
    process.wait(timeout=10)


def test_serve_injects_live_reload_and_allows_only_that_script(
    served: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    base, root, _ = served
    status, html = fetch(f"{base}/one/")
    assert status == 200
    soup = BeautifulSoup(html, "html.parser")
    scripts = soup.find_all("script")
    assert [s.get("src") for s in scripts] == [None, "/__konkord/reload.js"]
    assert scripts[0].string == REVEAL_JS, "the only inline script is the site's own"
    assert not scripts[1].string
    csp = str(soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})["content"])
    assert f"{SCRIPT_SRC} 'self';" in csp and "unsafe-inline" not in csp
    # The file on disk is the plain build: no reload script.
    on_disk = (root / "public/one/index.html").read_text()
    assert "reload.js" not in on_disk and on_disk.count("<script") == 1
    status, body = fetch(f"{base}/nowhere/")
    assert status == 404 and "Not found" in body


def test_a_content_edit_is_rebuilt_and_served_without_a_restart(
    served: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    base, root, process = served
    status, before = fetch(f"{base}/about/")
    assert status == 200 and "Freshly edited paragraph 4711" not in before
    (root / "content/about.md").write_text("# About\n\nFreshly edited paragraph 4711.\n")
    status, body = poll(
        f"{base}/about/", lambda s, b: "Freshly edited paragraph 4711" in b, HANG_S
    )
    assert "Freshly edited paragraph 4711" in body, "the edit was never served"
    assert status == 200 and process.poll() is None


def test_broken_template_shows_an_error_page_and_the_server_survives(
    served: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    base, root, process = served
    template = root / "templates/page.html"
    good = template.read_text()
    template.write_text("{% block main %}never closed")
    status, body = poll(f"{base}/about/", lambda s, _: s == 500, 10)
    assert status == 500
    soup = BeautifulSoup(body, "html.parser")
    assert soup.h1 is not None and soup.h1.get_text() == "Build failed"
    assert "templates/page.html" in soup.pre.get_text()
    assert "TemplateSyntaxError" in soup.pre.get_text()
    assert process.poll() is None, "the server kept running"
    template.write_text(good.replace("prose md", "prose md repaired"))
    status, body = poll(f"{base}/about/", lambda s, b: s == 200 and "repaired" in b, 10)
    assert status == 200 and "repaired" in body
    process.terminate()
    output, _ = process.communicate(timeout=10)
    assert "build failed (changed: templates/page.html)" in output
    assert "TemplateSyntaxError" in output


def test_an_unlisted_results_file_is_a_warning_not_a_failed_build(
    served: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    base, root, process = served
    (root / "results" / "extra.json").write_bytes((root / "results" / "one.json").read_bytes())
    status, body = poll(f"{base}/__konkord/build", lambda s, b: '"build": 2' in b, 10)
    assert '"error": null' in body, body
    status, body = poll(f"{base}/", lambda s, _: s == 200, 10)
    assert status == 200 and "Build failed" not in body
    process.terminate()
    output, _ = process.communicate(timeout=10)
    assert "Traceback" not in output, output
    assert "warning: results/extra.json: not on the site" in output
    # A copy of run "one"'s file: publishing "extra" could not help, so it is not advised.
    assert '"results": "results/extra.json" in that entry' in output
    assert "konkord publish" not in output
