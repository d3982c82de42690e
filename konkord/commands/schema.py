"""`konkord schema`: the JSON Schema of the results file."""

from __future__ import annotations

import click


@click.command()
@click.option(
    "--task",
    is_flag=True,
    help="The schema of one task file instead (results/<run>.tasks/<task>.json, where a large "
    "run keeps each task's answers and verdicts; the results file's task_files lists them).",
)
def schema(task: bool) -> None:
    """Print the JSON Schema of results/<run>.json (the versioned results file)."""
    import json

    from konkord.results.schema import TaskView, json_schema

    click.echo(json.dumps(TaskView.model_json_schema() if task else json_schema(), indent=2))
