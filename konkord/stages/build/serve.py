"""`konkord serve`: build, serve public/ on 127.0.0.1, rebuild on change, reload open pages.

The built pages are the same bytes `konkord build` writes; only on their way out does the
server add the live-reload script (an external same-origin file, allowed by relaxing the
page's CSP to add `'self'` to script-src). A failed build never stops the server: the
error is printed and every page shows it until the next build succeeds.
"""

from __future__ import annotations

import http.server
import json
import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from markupsafe import escape

from konkord.errors import KonkordError
from konkord.site.render import CSP, SCRIPT_SRC

WATCHED_DIRS = ("suites", "runs", "results", "templates", "content")
RELOAD_PATH = "/__konkord/reload.js"
STATE_PATH = "/__konkord/build"
SERVE_CSP = CSP.replace(SCRIPT_SRC, f"{SCRIPT_SRC} 'self'; connect-src 'self'")

# Polls the build counter and reloads the page when a new build (or a build error) lands.
RELOAD_JS = """(function () {
  var seen = document.currentScript.getAttribute("data-build");
  function poll() {
    fetch("STATE_PATH", {cache: "no-store"}).then(function (r) { return r.json(); }).then(
      function (s) {
        if (String(s.build) !== seen) { location.reload(); } else { setTimeout(poll, 400); }
      }).catch(function () { setTimeout(poll, 1500); });
  }
  setTimeout(poll, 400);
})();
""".replace("STATE_PATH", STATE_PATH)


@dataclass
class BuildState:
    """The latest build's number and error, shared by the builder and the request threads."""

    build: int = 0
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, error: str | None) -> int:
        with self.lock:
            self.build += 1
            self.error = error
            return self.build

    def snapshot(self) -> tuple[int, str | None]:
        with self.lock:
            return self.build, self.error


def reload_tag(build: int) -> str:
    return f'<script src="{RELOAD_PATH}" data-build="{build}"></script>'


def with_live_reload(html: str, build: int) -> str:
    """A built page as served in serve mode: reload script in, CSP relaxed to allow it."""
    html = html.replace(f'content="{CSP}"', f'content="{SERVE_CSP}"', 1)
    tag = reload_tag(build)
    if "</body>" in html:
        return html.replace("</body>", tag + "\n</body>", 1)
    return html + tag


def error_page(message: str, build: int) -> str:
    """What every page shows while the last build failed."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{SERVE_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>Build failed · Konkord</title><link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="/static/site.css"></head><body><main class="build-error">'
        "<h1>Build failed</h1><p>Fix the problem below and save; this page reloads by itself."
        f"</p><pre>{escape(message)}</pre></main>{reload_tag(build)}</body></html>"
    )


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Serves public/ with the live-reload script added, or the build error."""

    state: BuildState

    def __init__(self, *args: Any, state: BuildState, directory: str, **kwargs: Any) -> None:
        self.state = state
        super().__init__(*args, directory=directory, **kwargs)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal is for build messages."""

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        build, error = self.state.snapshot()
        if path == STATE_PATH:
            body = json.dumps({"build": build, "error": error}).encode()
            return self._send(200, body, "application/json")
        if path == RELOAD_PATH:
            return self._send(200, RELOAD_JS.encode(), "text/javascript; charset=utf-8")
        is_page = path.endswith("/") or path.endswith(".html")
        if error is not None and is_page:
            return self._send(500, error_page(error, build).encode(), "text/html; charset=utf-8")
        target = Path(self.translate_path(path))
        if target.is_dir():
            if not path.endswith("/"):
                self.send_response(301)
                self.send_header("Location", path + "/")
                self.end_headers()
                return None
            target = target / "index.html"
        if not target.is_file():
            not_found = Path(self.directory) / "404.html"
            text = not_found.read_text(encoding="utf-8") if not_found.is_file() else "Not found"
            return self._send(
                404, with_live_reload(text, build).encode(), "text/html; charset=utf-8"
            )
        if target.suffix == ".html":
            text = target.read_text(encoding="utf-8")
            return self._send(
                200, with_live_reload(text, build).encode(), "text/html; charset=utf-8"
            )
        return super().do_GET()


def _watch_roots(runs_file: Path) -> tuple[list[Path], Path]:
    dirs = [Path(name) for name in WATCHED_DIRS if Path(name).is_dir()]
    return dirs, runs_file.resolve().parent


def _watch(
    paths: list[Path],
    recursive: bool,
    accept: Callable[[str], bool],
    changes: queue.Queue[set[str]],
    stop: threading.Event,
    ready: threading.Event,
) -> None:
    """Queue the relevant changed paths until `stop`; `ready` is set once the watch is live."""
    import watchfiles

    if not paths:
        ready.set()
        return
    # A short timeout makes the watcher yield an empty batch as soon as it is set up, which
    # is how we know that an edit made from now on will be seen.
    for batch in watchfiles.watch(
        *paths,
        recursive=recursive,
        debounce=300,
        step=50,
        rust_timeout=200,
        yield_on_timeout=True,
        stop_event=stop,
        raise_interrupt=False,
    ):
        ready.set()
        relevant = {path for _, path in batch if accept(path)}
        if relevant:
            changes.put(relevant)


def _relative(path: str) -> str:
    here = Path.cwd()
    return str(Path(path).relative_to(here)) if Path(path).is_relative_to(here) else path


def _echo(line: str) -> None:
    print(line, flush=True)


class QuietServer(http.server.ThreadingHTTPServer):
    """A server that lets a reader leave mid-reply (a closed tab, a click away) in silence."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # not a fault: the terminal is for build messages, not tracebacks
        super().handle_error(request, client_address)


class SiteServer:
    """The build-watch-serve loop, startable and stoppable (tests run it in a thread)."""

    def __init__(
        self,
        port: int,
        out: Path,
        runs_file: Path,
        *,
        echo: Callable[[str], None] = _echo,
        build: Callable[[], str] | None = None,
    ) -> None:
        self.port = port
        self.out = out
        self.runs_file = runs_file
        self.echo = echo
        self.state = BuildState()
        self.stop = threading.Event()
        self._build = build or self._default_build
        self.changes: queue.Queue[set[str]] = queue.Queue()
        handler = partial(SiteHandler, state=self.state, directory=str(out.resolve()))
        try:
            self.httpd = QuietServer(("127.0.0.1", port), handler)
        except OSError as exc:
            raise KonkordError(
                f"cannot serve on 127.0.0.1:{port} ({exc.strerror}); pick another port with "
                "`konkord serve --port N`"
            ) from None
        self.httpd.daemon_threads = True

    def _default_build(self) -> str:
        from konkord.stages.build.build import build_site

        summary = build_site(
            self.out, offline=True, runs_file=self.runs_file, progress=lambda _: None
        )
        for note in summary.notes:  # e.g. a results file not on the site, and how to publish it
            self.echo(note)
        return summary.line()

    def rebuild(self, reason: str) -> None:
        """One build; its error is kept for the pages and printed, never raised."""
        try:
            line = self._build()
        except KonkordError as exc:
            self.state.record(str(exc))
            self.echo(f"build failed ({reason}):\n{exc}")
        except Exception as exc:  # a bug must not take the preview down either
            self.state.record(f"{type(exc).__name__}: {exc}")
            self.echo(f"build crashed ({reason}): {type(exc).__name__}: {exc}")
        else:
            self.state.record(None)
            self.echo(f"built ({reason}): {line}")

    def _builder(self) -> None:
        while not self.stop.is_set():
            try:
                changed = self.changes.get(timeout=0.2)
            except queue.Empty:
                continue
            while not self.changes.empty():  # coalesce a burst of saves into one build
                changed |= self.changes.get_nowait()
            names = sorted(_relative(p) for p in changed)
            self.rebuild("changed: " + ", ".join(names[:3]) + (" ..." if len(names) > 3 else ""))

    def start(self) -> SiteServer:
        """Watch, build once, then serve and rebuild in background threads."""
        self.out.mkdir(parents=True, exist_ok=True)
        dirs, root = _watch_roots(self.runs_file)
        out_dir = str(self.out.resolve())
        runs_path = str(self.runs_file.resolve())
        watches = [
            ([d.resolve() for d in dirs], True, lambda p: not p.startswith(out_dir)),
            ([root], False, lambda p: p == runs_path),
        ]
        ready = []
        for paths, recursive, accept in watches:
            event = threading.Event()
            ready.append(event)
            threading.Thread(
                target=_watch,
                args=(paths, recursive, accept, self.changes, self.stop, event),
                daemon=True,
            ).start()
        for event in ready:
            event.wait(timeout=10)
        self.rebuild("start")
        threading.Thread(target=self._builder, daemon=True).start()
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.echo(f"serving http://127.0.0.1:{self.port}/ from {self.out}/ (Ctrl-C to stop)")
        return self

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_site(
    port: int = 8787, out: Path = Path("public"), runs_file: Path = Path("runs.json")
) -> None:
    """Run the preview until Ctrl-C."""
    server = SiteServer(port, out, runs_file).start()
    try:
        server.stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
