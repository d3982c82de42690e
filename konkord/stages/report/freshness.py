"""Whether a results file is current: a digest of everything it is computed from.

Kept apart from the report stage, which imports the statistics (numpy and scipy cost most of
a second to import), so that `konkord report` and `konkord build` with nothing to recompute
answer at once. The digest is stored in the results file (`inputs_digest`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from konkord import __version__
from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log_hashes import sha256_of

DEFAULT_RESAMPLES = 1000
ResampleUnit = Literal["task", "judgments"]
EVIDENCE_STREAMS = ("answers", "verdicts", "prompts", "labels", "checks")
_HEAD_BYTES = 1 << 16
_STORED = re.compile(rb'^ ?"inputs_digest": (null|"([0-9a-f]*)")', re.MULTILINE)


@dataclass(frozen=True)
class ReportOptions:
    """How intervals are made; part of what a results file records about itself."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    unit: ResampleUnit = "task"


DEFAULT_OPTIONS = ReportOptions()


def inputs_digest(
    spec: RunSpec,
    options: ReportOptions = DEFAULT_OPTIONS,
    stream_hashes: dict[str, bytes] | None = None,
) -> str:
    """A hash of everything a results file is computed from, to tell when it is stale.

    Given `stream_hashes`, each evidence stream's own sha256 is put there too (by its path),
    the same hashes the digest is made of: what the report stamp's fingerprint needs
    (`konkord.results.buildstamp.fingerprint`), so that a report hashes a 300 MB verdict log
    once, not two or three times (`konkord.evidence.log_hashes`)."""
    digest = hashlib.sha256()
    digest.update(f"{__version__}|{options}|{spec.models}|{spec.judges}".encode())
    # Prices set every cost figure where no cost was recorded (the one cost rule).
    prices = {m: p.model_dump() for m, p in sorted(spec.prices.items())}
    digest.update(f"|prices={prices}|label_plan_n={spec.label_plan.n}".encode())
    if not spec.style_control:  # switching it off drops a block from the results
        digest.update(b"|style_control=off")
    digest.update(spec.suite.model_dump_json().encode())
    if spec.cascade is not None:  # a new threshold re-decides pairs: the results are stale
        digest.update(spec.cascade.model_dump_json().encode())
    for stream in EVIDENCE_STREAMS:
        path = spec.run_dir / f"{stream}.jsonl"
        digest.update(stream.encode())
        # Each stream by its own sha256: taken here, or where a reader hashed the whole file
        # already (`log_hashes`: the verdict log's saved columns are checked so).
        try:
            own = sha256_of(path)
        except OSError as exc:  # a folder where the stream should be: as EvidenceLog says it
            raise KonkordError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if own is not None:
            digest.update(own)
            if stream_hashes is not None:
                stream_hashes[str(path)] = own
    return digest.hexdigest()[:24]


def stored_digest(path: Path) -> str | None:
    """The `inputs_digest` a results file was written with; None when it has none or cannot
    be read. Read from the file's first lines (where `write_results` puts the top-level
    fields), or from the whole file when it was written some other way."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
            match = _STORED.search(head)
            if match is None:
                data = json.loads(head + handle.read())
                value = data.get("inputs_digest") if isinstance(data, dict) else None
                return value if isinstance(value, str) else None
    except (OSError, ValueError):
        return None
    return None if match.group(2) is None else match.group(2).decode()


_RUN = re.compile(rb'^ ?"run": "([^"\\]*)"', re.MULTILINE)


def stored_run_name(path: Path) -> str | None:
    """The run a results file belongs to (its `run` field); None when it cannot be read."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
            match = _RUN.search(head)
            if match is None:
                data = json.loads(head + handle.read())
                value = data.get("run") if isinstance(data, dict) else None
                return value if isinstance(value, str) else None
    except (OSError, ValueError):
        return None
    return match.group(1).decode("utf-8", "replace")


def results_current(
    spec: RunSpec, options: ReportOptions = DEFAULT_OPTIONS, path: Path | None = None
) -> bool:
    """Whether the results file (default: the run's) was computed from exactly these inputs."""
    stored = stored_digest(path or spec.results_path)
    return stored is not None and stored == inputs_digest(spec, options)
