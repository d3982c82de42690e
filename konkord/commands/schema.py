"""`konkord schema`: the JSON Schema of the results file."""

from __future__ import annotations

import click


@click.command()
def schema() -> None:
    """Print the JSON Schema of results/<run>.json (the versioned results file)."""
    import json

    from konkord.results.schema import json_schema

    click.echo(json.dumps(json_schema(), indent=2))
