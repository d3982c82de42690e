"""A no-change `konkord build` in a tenth of a second: a stamp of every input of the last build.

A build that left no note records, in .konkord/build/ (one stamp per set of folders, kept out
of the site so that public/ stays the same bytes for the same inputs), a hash of all it read: runs.json, each run's suite, evidence folder and results file, the results folders'
listings, the templates and content trees, the site's manifest, and the konkord code itself
(names, sizes and modification times of its files). The next build hashes the same inputs
first; when nothing differs and every output is still there, it says what it said then,
without importing pydantic, jinja2, numpy or litellm. Any difference, or a stamp written for
other folders, or an output changed since, takes the full path, which checks every stage as
before.

Within the full path, each run has a stamp of its own (its settings, suite, evidence and
results file): a run found complete before and unchanged since is not checked again, so a
template edit re-renders pages without parsing every run's evidence logs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

import konkord
from konkord.evidence.atomic import sweep_stale_tmp

STAMP_DIR = Path(".konkord") / "build"  # beside the response cache; not part of the site
STAMP_FORMAT = 1
MANIFEST_NAME = ".konkord-build.json"  # the site's own record of its outputs (site.incremental)


@dataclass(frozen=True)
class Replay:
    """What an unchanged build reports: the runs with their page counts, and the outputs."""

    runs: list[tuple[str, int]]
    outputs: int

    def lines(self) -> list[str]:
        return [f"run {name}: {pages} pages, unchanged" for name, pages in self.runs]

    def summary(self) -> str:
        return f"{len(self.runs)} runs, 0 files written, {self.outputs} unchanged, 0 removed"


def _code_signature() -> str:
    """Names, sizes and modification times of konkord's own files: new code, new stamp."""
    root = Path(konkord.__file__).parent
    rows = [konkord.__version__]
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            stat = os.stat(os.path.join(folder, name))
            rows.append(
                f"{os.path.relpath(os.path.join(folder, name), root)}:{stat.st_size}:{stat.st_mtime_ns}"
            )
    return "\n".join(rows)


def walk_tree(folder: Path) -> tuple[list[str], list[str]]:
    """Every file and every folder under `folder` (the folder itself included)."""
    files: list[str] = []
    folders: list[str] = [str(folder)]
    for parent, dirs, names in os.walk(folder, followlinks=True):
        dirs.sort()
        folders.extend(os.path.join(parent, d) for d in dirs)
        files.extend(os.path.join(parent, n) for n in sorted(names))
    return files, folders


def fingerprint(
    key: dict[str, str],
    files: list[str],
    folders: list[str],
    hashed: Mapping[str, bytes] | None = None,
) -> str:
    """One hash of the key, the code, each file's bytes and each folder's listing. `hashed`
    holds the sha256 of files the caller has just read whole (by name), not read again."""
    digest = hashlib.sha256()
    digest.update(json.dumps(key, sort_keys=True).encode())
    digest.update(_code_signature().encode())
    for name in sorted(set(files)):
        digest.update(f"\0file {name}\0".encode())
        if hashed is not None and name in hashed:
            digest.update(hashed[name])
            continue
        try:
            if not S_ISREG(os.stat(name).st_mode):
                digest.update(b"(not a file)")  # a FIFO put in a file's place would hang a read
                continue
            with open(name, "rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
        except OSError:
            digest.update(b"(missing)")
    for name in sorted(set(folders)):
        digest.update(f"\0folder {name}\0".encode())
        try:
            digest.update("\n".join(sorted(os.listdir(name))).encode())
        except OSError:
            digest.update(b"(missing)")
    return digest.hexdigest()


def _output_stats(out: Path, outputs: list[str]) -> dict[str, list[int]]:
    """Size and modification time of each output: a page rewritten or edited since the stamp
    (by hand, or by a build that stopped half way) makes the stamp void."""
    stats = {}
    for path in outputs:
        try:
            stat = os.stat(out / path)
        except OSError:
            stats[path] = [-1, -1]
        else:
            stats[path] = [stat.st_size, stat.st_mtime_ns]
    return stats


def build_key(out: Path, runs_file: Path, templates_dir: Path, content_dir: Path) -> dict[str, str]:
    """The folders a build was made with: a stamp from another set never replays."""
    return {
        "out": os.path.normpath(out),
        "runs_file": os.path.normpath(runs_file),
        "templates": os.path.normpath(templates_dir),
        "content": os.path.normpath(content_dir),
    }


def stamp_path(key: dict[str, str]) -> Path:
    """Where the stamp of a build with these folders lives."""
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return STAMP_DIR / f"{name}.json"


def replay(
    out: Path,
    runs_file: Path,
    templates_dir: Path = Path("templates"),
    content_dir: Path = Path("content"),
) -> Replay | None:
    """What the last build reported, if nothing it read has changed since; else None."""
    key = build_key(out, runs_file, templates_dir, content_dir)
    try:
        stamp = json.loads(stamp_path(key).read_text())
        if stamp.get("format") != STAMP_FORMAT:
            return None
        if stamp["key"] != key:
            return None
        if _output_stats(out, list(stamp["outputs"])) != stamp["outputs"]:
            return None
        if fingerprint(key, stamp["files"], stamp["folders"]) != stamp["fingerprint"]:
            return None
        # Nothing is rewritten, but what a killed build left in public/ must not be deployed.
        for folder in sorted({os.path.dirname(name) for name in stamp["outputs"]}):
            sweep_stale_tmp(out / folder)
        return Replay([(name, int(pages)) for name, pages in stamp["runs"]], len(stamp["outputs"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record(
    out: Path,
    runs_file: Path,
    templates_dir: Path,
    content_dir: Path,
    runs: list[tuple[str, Path, Path, Path]],
    results_folders: list[Path],
    pages: dict[str, int],
    outputs: list[str],
) -> None:
    """Stamp a build that ran nothing and left no note. `runs` holds (name, suite file,
    evidence folder, results file) for each run, in runs.json's order."""
    from konkord.evidence.atomic import write_bytes_if_changed

    files = [str(runs_file), str(out / MANIFEST_NAME)]
    folders = [str(folder) for folder in results_folders]
    for _name, suite, evidence, results in runs:
        files += [str(suite), str(results)]
        tree_files, tree_folders = walk_tree(evidence)
        files += tree_files
        folders += tree_folders
    for tree in (templates_dir, content_dir):
        tree_files, tree_folders = walk_tree(tree)
        files += tree_files
        folders += tree_folders
    key = build_key(out, runs_file, templates_dir, content_dir)
    stamp = {
        "format": STAMP_FORMAT,
        "key": key,
        "fingerprint": fingerprint(key, files, folders),
        "files": sorted(set(files)),
        "folders": sorted(set(folders)),
        "runs": [[name, pages[name]] for name, *_ in runs],
        "outputs": _output_stats(out, sorted(outputs)),
    }
    write_bytes_if_changed(stamp_path(key), (json.dumps(stamp, indent=1) + "\n").encode())


def _run_stamp(
    run: str, settings: str, suite: Path, evidence: Path, results: Path
) -> tuple[Path, dict[str, str], list[str], list[str]]:
    # Hashed: the settings may hold an api_base, and a stamp file is no place for any part of it.
    key = {"run": run, "settings": hashlib.sha256(settings.encode()).hexdigest()}
    files, folders = walk_tree(evidence)
    name = hashlib.sha256(run.encode()).hexdigest()[:16]
    return STAMP_DIR / "runs" / f"{name}.json", key, [str(suite), str(results), *files], folders


def run_checked(run: str, settings: str, suite: Path, evidence: Path, results: Path) -> bool:
    """Whether one run's stages were all found complete with exactly these inputs: its
    settings (`repr` of its spec without the suite), suite file, evidence and results file.
    Then `konkord build` need not parse its evidence again to find nothing missing."""
    path, key, files, folders = _run_stamp(run, settings, suite, evidence, results)
    try:
        stamp = json.loads(path.read_text())
        return bool(
            stamp["key"] == key and stamp["fingerprint"] == fingerprint(key, files, folders)
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def record_run_checked(run: str, settings: str, suite: Path, evidence: Path, results: Path) -> None:
    """Stamp a run whose stages were all found complete (or just completed) with no note."""
    from konkord.evidence.atomic import write_bytes_if_changed

    path, key, files, folders = _run_stamp(run, settings, suite, evidence, results)
    stamp = {"key": key, "fingerprint": fingerprint(key, files, folders)}
    write_bytes_if_changed(path, (json.dumps(stamp, indent=1) + "\n").encode())


def forget(out: Path, runs_file: Path, templates_dir: Path, content_dir: Path) -> None:
    """Drop the stamp (a build that left notes): the next build takes the full path."""
    stamp_path(build_key(out, runs_file, templates_dir, content_dir)).unlink(missing_ok=True)
