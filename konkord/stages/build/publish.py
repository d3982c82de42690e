"""`konkord publish NAME`: list a run made with `konkord run` or `konkord import` in runs.json,
so `konkord build` renders it and keeps it up to date.

The entry is taken from the run's manifest (runs/NAME/run.json) and, where the results file
exists, its models and judges, so build finds the two in agreement. runs.json is rewritten
atomically (a temporary file, fsync, rename): a crash leaves the old file or the new one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from konkord.configuration.runs_config import (
    DEFAULT_RUNS_FILE,
    Generation,
    load_runs,
    runs_file_present,
)
from konkord.configuration.runspec import load_manifest, manifest_path
from konkord.errors import KonkordError
from konkord.evidence.atomic import write_atomic


def _results_names(path: Path) -> tuple[list[str], list[str]] | None:
    """(models, judges) of an existing results file, or None when there is none to read."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes())
        return [str(m) for m in data["models"]], [str(j) for j in data["judges"]]
    except (ValueError, KeyError, TypeError):
        return None


def entry_for(name: str) -> dict[str, Any]:
    """The runs.json entry of an unlisted run, from its manifest and results file."""
    path = manifest_path(name)
    if not path.is_file():
        raise KonkordError(
            f'no run named "{name}" to publish: {path} does not exist (make it with '
            f"`konkord run --suite PATH --models A,B --run {name}` or `konkord import`)"
        )
    manifest = load_manifest(path)
    models, judges = list(manifest.models), list(manifest.judges)
    results = Path(f"results/{name}.json")
    found = _results_names(results)
    if found is not None:
        models, judges = found
    entry: dict[str, Any] = {"name": name, "suite": manifest.suite, "models": models}
    if judges:
        entry["judges"] = judges
    if manifest.generation != Generation():
        entry["generation"] = manifest.generation.model_dump()
    if manifest.api_base:
        entry["api_base"] = manifest.api_base
    return entry


def with_entry(text: str, entry: dict[str, Any]) -> str:
    """runs.json's text with `entry` appended to its runs, the rest kept byte for byte (the
    file is the user's, laid out by hand); rewritten whole only if it cannot be spliced."""
    data = json.loads(text)
    wanted = {**data, "runs": [*data.get("runs", []), entry]}
    block = json.dumps(entry, indent=2, ensure_ascii=False).replace("\n", "\n    ")
    close = re.search(r"\]\s*\}\s*$", text)
    if close is not None:
        head = text[: close.start()].rstrip()
        joiner = "\n    " if head.endswith("[") else ",\n    "
        spliced = f"{head}{joiner}{block}\n  {text[close.start() :]}"
        if json.loads(spliced) == wanted:
            return spliced
    return json.dumps(wanted, indent=2, ensure_ascii=False) + "\n"


def publish(name: str, runs_file: Path = DEFAULT_RUNS_FILE) -> dict[str, Any] | None:
    """Add run `name` to runs.json (created if absent); returns the entry written, or None if
    the run is listed already (publishing twice changes nothing)."""
    if runs_file_present(runs_file):
        listed = load_runs(runs_file)
        if any(run.name == name for run in listed.runs):
            return None
        old = runs_file.read_text(encoding="utf-8")
    else:
        old = '{"runs": []}\n'
    entry = entry_for(name)
    write_atomic(runs_file, with_entry(old, entry))
    load_runs(runs_file)  # what was written must read back; a bug here should shout
    return entry
