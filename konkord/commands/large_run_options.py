"""Options `run` and `judge` share for large runs: --batch, --dry-run, --max-cost."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from konkord.commands.inputs import DOLLARS

if TYPE_CHECKING:
    from konkord.providers.budget import Estimate
    from konkord.providers.llm import ModelClient

F = TypeVar("F", bound=Callable[..., Any])
# From this many calls a stage has worker processes make them: starting one costs about 2-3 s
# of CPU (importing litellm), a worker saves about 1 ms of wall time a call on two cores.
POOL_FROM_CALLS = 10_000


def default_processes(calls: int) -> int:
    """How many processes make a stage's calls when --processes is not given: one below
    POOL_FROM_CALLS calls, else one per usable core (at least two)."""
    if calls < POOL_FROM_CALLS:
        return 1
    import os

    return max(2, len(os.sched_getaffinity(0)))


def large_run_options(command: F) -> F:
    """Add `--batch`, `--dry-run` and `--max-cost USD` to a command."""
    command = click.option(
        "--max-cost",
        type=DOLLARS,
        metavar="USD",
        help="Launch no call that could take the run's spending (its evidence included) past "
        "USD; calls in flight finish and are saved. Rerun with a higher cap to continue.",
    )(command)
    command = click.option(
        "--dry-run",
        is_flag=True,
        help="Print per model the calls still to make, tokens, cost range and time at the "
        "configured rate limits; call nothing.",
    )(command)
    command = click.option(
        "--batch",
        is_flag=True,
        help="Send the calls through the provider's batch API (about half price, replies "
        "within 24 h); a rerun after a crash collects submitted batches, never resubmits.",
    )(command)
    return command


def print_estimates(estimates: list[Estimate], batch: bool) -> None:
    """The dry-run report on stdout."""
    from konkord.providers.budget import estimate_lines

    for line in estimate_lines(estimates, batch):
        click.echo(line)


def report_budget(client: ModelClient) -> bool:
    """Say how far a capped run got; True when the cap stopped it."""
    budget = client.budget
    if budget is None or not budget.closed:
        return False
    click.secho(budget.report(), fg="yellow", err=True)
    return True


def batch_status(text: str) -> None:
    """Batch progress lines (submitted, in progress, collected) on stderr."""
    click.echo(text, err=True)
