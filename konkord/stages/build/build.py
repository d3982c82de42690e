"""`konkord build`: check runs.json against results/, then render every run into public/.

Like make: a results file whose bytes are unchanged is not even parsed again, a page whose
inputs are unchanged is not rewritten, and the pages of a run that left runs.json are removed.
Everything is loaded and checked before anything reaches the site: pages are written into a
staging copy swapped in at the end (`konkord.site.staging`). A large run's task pages start
rendering there, in worker processes, while the build checks that no run owes any work; they
are kept only if the check leaves their results file as it was (`render_before_checking`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from konkord.configuration.runs_config import RunEntry, load_runs, runs_file_present
from konkord.configuration.runspec import RUNS_ROOT, RunSpec, spec_from_entry
from konkord.errors import KonkordError
from konkord.evidence.paths import require_folder_inside, require_state_inside
from konkord.results import buildstamp
from konkord.results.files import task_file_paths, task_files_of
from konkord.results.schema import SCHEMA_VERSION, read_results
from konkord.site.generate import (
    MAX_FOLDER_REDIRECTS,
    LoadedRun,
    SiteRenderer,
    folder_pages,
    shown_summary,
    write_extras,
)
from konkord.site.incremental import Manifest, OutputWriter
from konkord.site.limits import count_files, refuse_large_file, refuse_large_results
from konkord.site.parallel import Ahead, render_ahead, render_runs, worker_count
from konkord.site.render import RESERVED_NAMES, RunSummary, load_content, sha256
from konkord.site.staging import staged_site
from konkord.stages.build.listing import RESULTS_DIR, check_against_entry, unlisted_results

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildSummary:
    """What a build did: the runs rendered, files written, kept and removed, and notes."""

    runs: list[str]
    written: list[str]
    unchanged: int
    removed: list[str]
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{len(self.runs)} runs, {len(self.written)} files written, "
            f"{self.unchanged} unchanged, {len(self.removed)} removed"
        )


def ensure_stages(spec: RunSpec, offline: bool) -> list[str]:
    """Run the missing or stale stages of one run (answers, verdicts, simulated labels, checks,
    report) before rendering; returns notes for the summary.

    A results file with no evidence beside it (imported, or made elsewhere) is rendered as it
    is. With `offline`, no model is called and anything missing is an error naming it.
    """
    import sys

    from konkord.evidence.log import EvidenceLog

    if not EvidenceLog(spec.run_dir).exists() and spec.results_path.exists():
        return []
    # Found complete before, and nothing it depends on changed since: no need to parse the
    # evidence again (a template edit must not re-read every run's logs).
    from konkord.stages.owed_stamp import run_settings

    stamp = (spec.name, run_settings(spec), spec.suite_path, spec.run_dir)
    if buildstamp.run_checked(*stamp, spec.results_path):
        return []
    from konkord.stages.pipeline import ensure_run

    notes = ensure_run(spec, offline, lambda line: print(line, file=sys.stderr))
    if not notes:
        buildstamp.record_run_checked(*stamp, spec.results_path)
    return notes


def _naming_run(run: str, message: str) -> str:
    """A stage's error with the run it belongs to in front, unless it names it already."""
    return message if f"run {run}" in message or f'"{run}"' in message else f"run {run}: {message}"


def summary_of(path: Path, data: bytes) -> RunSummary:
    """A results file's summary from the few fields it needs (fast); anything odd is handed
    to `read_results`, whose message names the file and the fix."""
    try:
        summary = RunSummary.from_results_json(data)
    except ValueError:
        return RunSummary.of(read_results(path))
    if summary.schema_version != SCHEMA_VERSION:
        return RunSummary.of(read_results(path))
    return summary


def refuse_unservable(path: Path, data: bytes, run: str) -> None:
    """Refuse, in one line, a results file or task file too large for a static host."""
    refuse_large_results(path, len(data), run)
    files = task_files_of(data)
    if files is not None:
        for _, task_path in task_file_paths(path, files):
            size = task_path.stat().st_size if task_path.is_file() else 0
            refuse_large_file(task_path, size, "Split the task or shorten its answers")


def read_run(entry: RunEntry, manifest: Manifest, data: bytes) -> LoadedRun:
    """A run with its results file's bytes as they are now: hashed, and its summary read
    (from the manifest when the file is unchanged since the last build)."""
    path = entry.results_path
    sha = sha256(data)
    cached = manifest.runs.get(entry.name, {})
    if (
        cached.get("sha") == sha
        and cached.get("summary", {}).get("schema_version") == SCHEMA_VERSION
        # a summary cached by a konkord whose summaries had other fields is read again
        and set(cached["summary"]) == set(RunSummary.__dataclass_fields__)
    ):
        return LoadedRun(entry, path, sha, RunSummary.from_json(cached["summary"]), True)
    return LoadedRun(entry, path, sha, summary_of(path, data), False)


def newer_than_its_inputs(entry: RunEntry, runs_file: Path) -> bool:
    """Whether the run's results file was written after runs.json, its suite and every file
    of its evidence folder: then the check most likely leaves it alone, and rendering its
    pages before the check is worth the CPU. Only a guess: a wrong one costs time, never a
    wrong page (`konkord.site.parallel.Ahead`)."""
    try:
        made = entry.results_path.stat().st_mtime_ns
        inputs = [runs_file, runs_file.parent / entry.suite]
        for folder, _dirs, names in os.walk(RUNS_ROOT / entry.name):
            inputs += [Path(folder) / name for name in names]
        return all(path.stat().st_mtime_ns <= made for path in inputs)
    except OSError:
        return False


def render_before_checking(
    out: Path, previous: Manifest, runs_file: Path, templates_dir: Path, content_dir: Path
) -> Ahead | None:
    """Start rendering large runs' task pages from their results files as they are, in worker
    processes, while this process checks that nothing is owed (`load_runs_checked`): the
    pages of a run whose file the check leaves alone are used, the others thrown away
    (`konkord.site.parallel.Ahead`). Anything unusual (no runs.json, a file that does not
    read): no head start, and the build goes on as without one."""
    if worker_count() < 2 or not runs_file_present(runs_file):
        return None
    if not (templates_dir / "base.html").is_file():
        return None
    try:
        guesses = []
        for entry in load_runs(runs_file).runs:
            if entry.name not in RESERVED_NAMES and newer_than_its_inputs(entry, runs_file):
                data = entry.results_path.read_bytes()
                refuse_unservable(entry.results_path, data, entry.name)
                guesses.append(read_run(entry, previous, data))
        renderer = SiteRenderer(templates_dir, OutputWriter(out, previous), load_content(content_dir))
        return render_ahead(renderer, guesses, out, content_dir)
    except (KonkordError, OSError, ValueError):
        return None


def load_runs_checked(
    runs_file: Path, manifest: Manifest, offline: bool, progress: Progress
) -> tuple[list[LoadedRun], list[str]]:
    """Every run of runs.json with its results file, checked in both directions; all problems
    are gathered and raised together so one build shows every fix needed."""
    if not runs_file_present(runs_file):
        raise KonkordError(
            f"{runs_file}: not found; run `konkord build` from the project root, or create "
            'it with {"runs": []} for an empty site'
        )
    runs = load_runs(runs_file)
    problems: list[str] = []
    notes: list[str] = []
    loaded: list[LoadedRun] = []
    for entry in runs.runs:
        if entry.name in RESERVED_NAMES:
            problems.append(
                f'{runs_file}: run name "{entry.name}" is reserved for the site '
                f"({', '.join(sorted(RESERVED_NAMES))}); rename the run"
            )
            continue
        try:
            spec = spec_from_entry(entry, runs_file.parent)
            notes.extend(ensure_stages(spec, offline))
        except KonkordError as exc:
            problems.append(_naming_run(entry.name, str(exc)))
            continue
        path = entry.results_path
        if not path.exists():
            problems.append(
                f'{path}: missing, but {runs_file} lists run "{entry.name}"; create it with '
                f"`konkord report --run {entry.name}`, or remove the run from {runs_file}"
            )
            continue
        data = path.read_bytes()
        refuse_unservable(path, data, entry.name)
        try:
            run = read_run(entry, manifest, data)
        except KonkordError as exc:
            problems.append(_naming_run(entry.name, str(exc)))
            continue
        problems.extend(check_against_entry(entry, run.summary, path, runs_file))
        loaded.append(run)
    notes.extend(f"warning: {line}" for line in unlisted_results(runs, runs_file))
    for note in notes:
        progress(note)
    if problems:
        raise KonkordError(
            f"{runs_file} and the results files disagree ({len(problems)} problem"
            f"{'s' if len(problems) != 1 else ''}):\n  " + "\n  ".join(problems)
        )
    return loaded, notes


def _render_site(
    out: Path,
    previous: Manifest,
    loaded: list[LoadedRun],
    templates_dir: Path,
    content_dir: Path,
    report: Progress,
    ahead: Ahead | None = None,
) -> OutputWriter:
    """Render every page and extra into `out` (the staging folder), with what was rendered
    `ahead` of the check where it holds; returns the writer."""
    writer = OutputWriter(out, previous)
    renderer = SiteRenderer(templates_dir, writer, load_content(content_dir))
    pages = render_runs(renderer, loaded, out, content_dir, report, ahead)
    for run in loaded:
        writer.current.runs[run.entry.name] = {
            "sha": run.sha,
            "summary": run.summary.to_json(),
            "pages": pages[run.entry.name],
        }
    renderer.site_pages([shown_summary(run) for run in loaded])
    write_extras(writer, templates_dir, loaded)
    too_many = count_files(writer.current.outputs)
    if too_many:
        report(too_many)
    writer.finish()
    return writer


def forget_parsed_evidence() -> None:
    """Let go of the evidence this process parsed (records and verdict columns): at 20 models
    x 1,000 tasks a few hundred MB that rendering the pages never reads."""
    from konkord.evidence.log import PARSED
    from konkord.evidence.verdict_table import TABLES

    PARSED.clear()
    TABLES.clear()


def build_site(
    out: Path = Path("public"),
    offline: bool = False,
    runs_file: Path = Path("runs.json"),
    *,
    templates_dir: Path = Path("templates"),
    content_dir: Path = Path("content"),
    progress: Progress | None = None,
) -> BuildSummary:
    """Check every run of runs.json against its results file, then render the site into `out`.

    Paths are relative to the working directory (the project root), as everywhere in konkord.
    """
    require_folder_inside(out, "--out", runs_file.parent)
    require_state_inside(runs_file.parent)
    if out.exists() and not out.is_dir():
        raise KonkordError(f'--out "{out}" is a file, expected a folder for the site')
    report = progress or (lambda _line: None)
    previous = Manifest.load(out)
    with staged_site(out) as staging:
        ahead = render_before_checking(staging, previous, runs_file, templates_dir, content_dir)
        try:
            loaded, notes = load_runs_checked(runs_file, previous, offline, report)
            forget_parsed_evidence()  # pages are made from results files: evidence done with
            writer = _render_site(
                staging, previous, loaded, templates_dir, content_dir, report, ahead
            )
        finally:
            if ahead is not None:
                ahead.close()
    unredirected = len(folder_pages(writer.current.outputs)) - MAX_FOLDER_REDIRECTS
    if unredirected > 0:
        report(
            f"note: {unredirected} page folders past Cloudflare's limit of static redirects get "
            "none from their address typed without the final slash (links name each page, so "
            "only an address typed by hand misses)"
        )
    pages = {name: info["pages"] for name, info in writer.current.runs.items()}
    if notes:  # something was left undone: the next build must look again
        buildstamp.forget(out, runs_file, templates_dir, content_dir)
    else:  # the next build with the same inputs can replay this one's report
        buildstamp.record(
            out,
            runs_file,
            templates_dir,
            content_dir,
            [(r.entry.name, Path(r.entry.suite), RUNS_ROOT / r.entry.name, r.path) for r in loaded],
            sorted({RESULTS_DIR} | {r.entry.results_path.parent for r in loaded}),
            {name: len(run_pages) for name, run_pages in pages.items()},
            list(writer.current.outputs),
        )
    return BuildSummary(
        runs=[run.entry.name for run in loaded],
        written=list(writer.written),
        unchanged=writer.unchanged,
        removed=list(writer.removed),
        notes=notes,
    )
