"""A run found to owe nothing (no answer, no judge call), stamped with every input of that
finding, so that the next command to ask need not find it again.

Finding it takes every call the design owes composed and hashed against the verdict on
record: 380,000 messages at 20 models x 1,000 tasks, about 4 s of `konkord build`. `konkord
judge` has just done that work when it ends with nothing left; the build after it (or after
`konkord report`, which leaves the evidence alone) then takes the stamp instead. The stamp
holds a hash of the run's settings, its suite file, every file of its evidence folder (their
bytes) and konkord's own code (`konkord.results.buildstamp.fingerprint`): a new answer,
verdict, failure or label, an edited suite or runs.json entry, or new code, and the run is
checked again in full. Kept in .konkord/owed/, beside the other state: a stamp found there
never claims more than that the evidence it names was complete. The check itself, and the
stamping after it, are `konkord.stages.pipeline`'s (`owed_work`, `stamp_if_owing_nothing`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path

from konkord.configuration.runspec import RunSpec
from konkord.evidence.atomic import write_bytes_if_changed
from konkord.evidence.log_hashes import sha256_of
from konkord.results.buildstamp import fingerprint, walk_tree

STAMP_DIR = Path(".konkord") / "owed"


def run_settings(spec: RunSpec) -> str:
    """Everything of a run's spec but its suite (whose file is hashed instead), as text."""
    return "|".join(
        f"{f.name}={getattr(spec, f.name)!r}" for f in fields(spec) if f.name != "suite"
    )


def _fingerprint(spec: RunSpec) -> tuple[Path, str]:
    """Where the run's stamp lives, and the hash of its inputs as they are now. The evidence
    files are hashed once per process (`log_hashes`): the report's digest takes the same."""
    # The settings are hashed: they may hold an api_base, and a stamp is no place for it.
    key = {"run": spec.name, "settings": hashlib.sha256(run_settings(spec).encode()).hexdigest()}
    files, folders = walk_tree(spec.run_dir)
    hashed = {}
    for name in files:
        try:
            digest = sha256_of(Path(name))
        except OSError:
            continue  # read by `fingerprint`, which marks it as unreadable
        if digest is not None:
            hashed[name] = digest
    found = fingerprint(key, [str(spec.suite_path), *files], folders, hashed)
    name = hashlib.sha256(spec.name.encode()).hexdigest()[:16]
    return STAMP_DIR / f"{name}.json", found


def owes_nothing(spec: RunSpec) -> bool:
    """Whether the run was found to owe nothing with exactly the inputs it has now."""
    return stamp_holds(spec)[0]


def stamp_holds(spec: RunSpec) -> tuple[bool, str]:
    """Whether the run was found to owe nothing with exactly the inputs it has now, and their
    fingerprint now: where it does not, a check follows, and the fingerprint is the `before`
    its stamp is kept with (`record_owing_nothing`), not taken again."""
    path, found = _fingerprint(spec)
    try:
        return bool(json.loads(path.read_text())["fingerprint"] == found), found
    except (OSError, ValueError, KeyError, TypeError):
        return False, found


def record_owing_nothing(spec: RunSpec, before: str) -> None:
    """Stamp the run as owing nothing, found with the inputs whose fingerprint was `before`
    (taken before the check): kept only if they are still those."""
    path, after = _fingerprint(spec)
    if after == before:
        write_bytes_if_changed(path, (json.dumps({"fingerprint": after}) + "\n").encode())


def fingerprint_now(spec: RunSpec) -> str:
    """The fingerprint of the run's inputs now, to hand to `record_owing_nothing` after a
    check."""
    return _fingerprint(spec)[1]
