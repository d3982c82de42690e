"""`konkord import`: published human-labelled comparison sets turned into a Konkord run."""

from __future__ import annotations

from pathlib import Path

import click

from konkord.commands.inputs import RUN_NAME


@click.group(name="import")
def import_cmd() -> None:
    """Import a published set of human-labelled comparisons as a run, so judges
    can be calibrated against it and new judges run on the same pairs."""


@import_cmd.command(name="mt-bench-human")
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--run", "run_name", type=RUN_NAME, default="mt-bench-human", show_default=True, help="Name of the new run."
)
@click.option(
    "--with-authors",
    is_flag=True,
    help="Also import the paper authors' votes as labels (left out of the published table).",
)
def mt_bench_human(paths: tuple[Path, ...], run_name: str, with_authors: bool) -> None:
    """Import the MT-Bench human judgments (lmsys/mt_bench_human_judgments):
    the Hugging Face rows (JSONL, JSON or Parquet, with conversations) or the
    labels-only JSONL files. Tasks are (question, turn), ids like q81-t1;
    expert votes become labels, GPT-4 pair votes the verdicts of judge
    gpt4_pair, and answers are imported when conversations are present.
    Then: `konkord report --run NAME` and `konkord calibrate --run NAME`.
    """
    from konkord.importers.mtbench import import_mtbench

    summary = import_mtbench(list(paths), run=run_name, with_authors=with_authors)
    for line in summary.lines():
        click.echo(line)
