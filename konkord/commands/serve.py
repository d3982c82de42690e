"""`konkord serve`: build, serve public/ locally, rebuild and reload on every change."""

from __future__ import annotations

from pathlib import Path

import click

from konkord.commands.inputs import PORT
from konkord.commands.site_options import site_options


@click.command()
@click.option("--port", type=PORT, default=8787, show_default=True, help="Port on 127.0.0.1.")
@site_options("Folder the site is written to and served from.")
def serve(port: int, out: Path, runs_file: Path) -> None:
    """Preview the site at http://127.0.0.1:PORT/ while you edit it.

    Builds once (offline: no model is called), then watches suites/, runs.json,
    runs/, results/, templates/ and content/, rebuilds what changed and reloads
    open pages. A build error is printed here and shown on the page; the server
    keeps running until Ctrl-C.
    """
    from konkord.evidence.paths import require_folder_inside
    from konkord.stages.build.serve import serve_site

    # refused before serving: the server would make and serve the folder wherever it points
    require_folder_inside(out, "--out", runs_file.parent)
    serve_site(port=port, out=out, runs_file=runs_file)
