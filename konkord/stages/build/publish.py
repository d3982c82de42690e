"""`konkord publish NAME`: list a run made with `konkord run` or `konkord import` in runs.json,
so `konkord build` renders it and keeps it up to date.

The entry is the run's manifest (runs/NAME/run.json), every field kept, with the judges that
have verdicts in its evidence (imported ones included), so build finds entry and results
agree. runs.json is rewritten atomically (a temporary file, fsync, rename): a crash leaves the
old file or the new one.
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


def _judges_in_evidence(name: str) -> list[str]:
    """Every judge with verdicts in the run's evidence, imported ones included."""
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdicts import judges_in_log

    run_dir = manifest_path(name).parent
    return judges_in_log(EvidenceLog(run_dir)) if (run_dir / "verdicts.jsonl").exists() else []


def entry_for(name: str) -> dict[str, Any]:
    """The runs.json entry of an unlisted run: every field of its manifest (cascade,
    deployments, prices, label plan, generation settings), its judges taken from the evidence
    as `konkord report` takes them, so `konkord build` finds the entry and results agree."""
    path = manifest_path(name)
    if not path.is_file():
        raise KonkordError(
            f'no run named "{name}" to publish: {path} does not exist (make it with '
            f"`konkord run --suite PATH --models A,B --run {name}` or `konkord import`)"
        )
    manifest = load_manifest(path)
    fields = manifest.model_dump(mode="json", exclude_defaults=True)
    first_pass = manifest.cascade.first_pass if manifest.cascade is not None else None
    judges = [
        j
        for j in dict.fromkeys([*manifest.judges, *_judges_in_evidence(name)])
        if j != first_pass  # the first pass is evidence for the cascade, not a judge listed
    ]
    entry: dict[str, Any] = {"name": name, "suite": manifest.suite, "models": list(manifest.models)}
    if judges:
        entry["judges"] = judges
    for key, value in fields.items():
        if key not in entry and key not in {"judges", "generation"}:
            entry[key] = value
    if manifest.generation != Generation():
        entry["generation"] = manifest.generation.model_dump()
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
