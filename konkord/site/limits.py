"""What a static host takes: Cloudflare's static assets serve at most 25 MiB per file and 20,000
files per version on the free plan (100,000 on a paid one). A site over either limit cannot be
deployed at all, so `konkord build` refuses it in one line that names the file and its size,
rather than leave the surprise to `wrangler deploy`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from konkord.errors import KonkordError

MAX_FILE_BYTES = 25 * 2**20
FREE_PLAN_FILES = 20_000
PAID_PLAN_FILES = 100_000


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def refuse_large_file(name: Path | str, size: int, fix: str) -> None:
    """Raise the one-line refusal if a file bound for the site is over the per-file limit."""
    if size > MAX_FILE_BYTES:
        raise KonkordError(
            f"{name}: {mib(size)} ({size:,} bytes), over the {mib(MAX_FILE_BYTES)} a static host "
            f"serves per file (Cloudflare); the site was not built. {fix}"
        )


def refuse_large_results(path: Path, size: int, run: str) -> None:
    """A results file too large to serve: one written whole by an earlier konkord."""
    refuse_large_file(
        path,
        size,
        f"Make it again with `konkord report --run {run}`, which writes a large run's tasks to "
        "a file each",
    )


def count_files(outputs: Iterable[str]) -> str | None:
    """A warning when the site has more files than the free plan takes; an error past the paid
    plan's limit."""
    count = sum(1 for _ in outputs)
    if count > PAID_PLAN_FILES:
        raise KonkordError(
            f"the site has {count:,} files, over the {PAID_PLAN_FILES:,} files a Cloudflare "
            "version takes on any plan; publish fewer runs or tasks"
        )
    if count > FREE_PLAN_FILES:
        return (
            f"warning: the site has {count:,} files, over the {FREE_PLAN_FILES:,} a Cloudflare "
            f"version takes on the free plan (a paid plan takes {PAID_PLAN_FILES:,})"
        )
    return None
