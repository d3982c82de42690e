"""Options `build` and `serve` share, defined once so their defaults cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def site_options(out_help: str) -> Callable[[F], F]:
    """Add `--out` (the site folder) and `--runs` (the runs file) to a command."""

    def decorate(command: F) -> F:
        command = click.option(
            "--runs",
            "runs_file",
            default="runs.json",
            show_default=True,
            type=click.Path(path_type=Path),
            help="The runs file listing the published runs.",
        )(command)
        command = click.option(
            "--out",
            default="public",
            show_default=True,
            type=click.Path(file_okay=False, path_type=Path),
            help=out_help,
        )(command)
        return command

    return decorate
