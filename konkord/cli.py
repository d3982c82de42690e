"""The command line: a thin layer that parses options, calls one stage, and prints.

Each command lives in konkord/commands/<name>.py and imports its heavy machinery (litellm,
streamlit, numpy) inside the command, so `konkord --help` starts fast.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import sys
import threading
from typing import Any

import click

from konkord import __version__
from konkord.errors import KonkordError

# command name -> "module:attribute"; each module is light at import time.
COMMANDS: dict[str, str] = {
    "validate": "konkord.commands.validate:validate",
    "run": "konkord.commands.run:run",
    "build": "konkord.commands.build:build",
    "serve": "konkord.commands.serve:serve",
    "judge": "konkord.commands.judge:judge",
    "report": "konkord.commands.report:report",
    "schema": "konkord.commands.schema:schema",
    "label": "konkord.commands.label:label",
    "check": "konkord.commands.check:check",
    "simulate": "konkord.commands.simulate:simulate",
    "calibrate": "konkord.commands.calibrate:calibrate",
    "judges": "konkord.commands.judges:judges",
    "import": "konkord.commands.import_cmd:import_cmd",
    "publish": "konkord.commands.publish:publish",
}


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command is listed or run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attribute)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        from konkord.evidence.atomic import forget_sweeps

        forget_sweeps()  # each command clears what a killed writer left, once per folder
        try:
            return super().invoke(ctx)
        except KonkordError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.secho(
                "\ninterrupted: everything finished so far is saved; run the same command "
                "again to resume",
                fg="yellow",
                err=True,
            )
            sys.exit(130)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="konkord")
def cli() -> None:
    """Rank language models with a blind pairwise LLM judge, then measure whether
    the judge can be trusted against blind human labels.

    \b
    The stages, in order:
      run        ask every model for one answer per task
      judge      compare every pair of answers, in both orders
      check      run code answers against the task's tests, in a sandbox
      label      a local app where a person labels comparisons blind
      calibrate  judge-vs-human agreement, with intervals
      report     Bradley-Terry ratings, intervals, diagnostics -> results/<run>.json
      judges     the run's judges compared: people, tests, each other, cost
      publish    list a run of your own in runs.json, so the site shows it
      build      run what is missing for every run in runs.json, render public/

    \b
    Try it offline: `konkord build` renders the shipped demo into public/, and
    `konkord simulate --help` plans a study before you pay for it.
    """


def main() -> None:
    """Console-script entry point."""
    import konkord.commands

    konkord.commands.PROCESS_ENDS_WITH_COMMAND = True
    try:
        cli(prog_name="konkord")
    except SystemExit as stop:
        # The command is over and its work saved (click ends every command this way). The
        # interpreter would take another half second to exit, freeing every object one by one
        # (a report at 20 models x 1,000 tasks holds millions): when no other thread is left
        # to wait for, the exit hooks run, the output is flushed, and the process ends. Not
        # under a profiler or tracer (pyinstrument, cProfile, coverage): they report after.
        if threading.active_count() == 1 and sys.getprofile() is None and sys.gettrace() is None:
            _leave(_status(stop.code))
        raise
    finally:
        # An error that is not click's (a traceback) ends the usual way. Python drops its own
        # Ctrl-C handler before exiting: a Ctrl-C there killed the process by the signal.
        # Until the exit hooks, Ctrl-C ends it at once (130); from them on it is ignored, so
        # the command's own status stands.
        signal.signal(signal.SIGINT, _exit_interrupted)
        atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)


def _status(code: object) -> int:
    """The exit status `sys.exit(code)` gives: None is 0, a number itself, else printed, 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _leave(status: int) -> None:
    """Exit with `status` as the interpreter would, less its teardown: the exit hooks first
    (temporary folders, worker processes, logging: `atexit._run_exitfuncs` is how the
    interpreter runs them), then stdout and stderr flushed (a reader gone is status 120, as
    Python says it), then the process ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command's own status stands
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: nothing more can be said
            status = status or 120
    os._exit(status)


def _exit_interrupted(signum: int, frame: Any) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(130)


if __name__ == "__main__":
    main()
