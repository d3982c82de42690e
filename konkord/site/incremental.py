"""Which outputs to rewrite: a hash of each page's inputs, remembered between builds.

The manifest (public/.konkord-build.json) maps every output to the hash of its inputs (results
file, templates it uses, content files, konkord version). A page whose hash is unchanged and
whose file is still there is neither rendered nor written; outputs that no longer belong to
the site (a removed run's pages) are deleted. Nothing here reads a clock, so the same inputs
give the same bytes, manifest included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konkord.evidence.atomic import write_bytes_if_changed
from konkord.results.buildstamp import MANIFEST_NAME
from konkord.site.limits import refuse_large_file
from konkord.site.render import sha256

MANIFEST_FORMAT = 1


def input_hash(*parts: Any) -> str:
    """The hash of a page's inputs, from plain JSON-able parts."""
    return sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")))


@dataclass
class Manifest:
    """What the last build wrote, and from what."""

    outputs: dict[str, str] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, out: Path) -> Manifest:
        """The previous build's manifest; a missing or foreign one means "rebuild everything"."""
        try:
            data = json.loads((out / MANIFEST_NAME).read_text())
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            return cls()
        return cls(outputs=dict(data.get("outputs", {})), runs=dict(data.get("runs", {})))

    def save(self, out: Path) -> None:
        data = {"format": MANIFEST_FORMAT, "outputs": self.outputs, "runs": self.runs}
        write_bytes_if_changed(
            out / MANIFEST_NAME,
            (json.dumps(data, sort_keys=True, indent=1) + "\n").encode(),
        )


@dataclass
class OutputWriter:
    """Writes a build's outputs against the previous manifest and counts what happened."""

    out: Path
    previous: Manifest
    current: Manifest = field(default_factory=Manifest)
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)

    def is_current(self, path: str, digest: str) -> bool:
        """Whether `path` was written from exactly these inputs and is still on disk."""
        return self.previous.outputs.get(path) == digest and (self.out / path).is_file()

    def keep(self, path: str, digest: str) -> None:
        """Record an output that needs no work."""
        self.current.outputs[path] = digest
        self.unchanged += 1

    def write(self, path: str, data: bytes, digest: str) -> None:
        """Record an output and write it if its bytes changed; one too large to serve is
        refused."""
        refuse_large_file(self.out / path, len(data), "Nothing this large can be deployed")
        self.current.outputs[path] = digest
        if write_bytes_if_changed(self.out / path, data):
            self.written.append(path)
        else:
            self.unchanged += 1

    def remove_stale(self) -> list[str]:
        """Delete outputs of the previous build that this one did not produce."""
        for path in sorted(set(self.previous.outputs) - set(self.current.outputs)):
            target = self.out / path
            if target.is_file():
                target.unlink()
                self.removed.append(path)
                _prune_empty_dirs(target.parent, self.out)
        return self.removed

    def finish(self) -> None:
        self.remove_stale()
        self.current.save(self.out)


def _prune_empty_dirs(directory: Path, stop: Path) -> None:
    while directory != stop and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent
