"""`konkord build`: check runs.json against results/, then render every run into public/.

Like make: a results file whose bytes are unchanged is not even parsed again, a page whose
inputs are unchanged is not rewritten, and the pages of a run that left runs.json are removed.
Everything is loaded and checked before anything is written (contexts first, pages second).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from pydantic import ValidationError

from konkord import __version__
from konkord.errors import KonkordError
from konkord.results import SCHEMA_VERSION, Results, read_results
from konkord.runs_config import RunEntry, RunsFile, load_runs
from konkord.runspec import RunSpec, spec_from_entry
from konkord.site.incremental import Manifest, OutputWriter, input_hash
from konkord.site.render import (
    CSP,
    RESERVED_NAMES,
    ContentFile,
    PagePlan,
    RunSummary,
    context_fingerprint,
    load_content,
    make_environment,
    plan_run_pages,
    plan_site_pages,
    render_page,
    sha256,
    site_nav,
    template_hash,
    validate_task_ids,
)

Progress = Callable[[str], None]
RESULTS_DIR = Path("results")

HEADERS = f"""/*
  Content-Security-Policy: {CSP}; frame-ancestors 'none'
  X-Content-Type-Options: nosniff
  X-Frame-Options: DENY
  Referrer-Policy: no-referrer
  Permissions-Policy: camera=(), microphone=(), geolocation=(), interest-cohort=()
  Cross-Origin-Opener-Policy: same-origin
/results/*
  Access-Control-Allow-Origin: *
"""


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
    """Hook for running the missing or stale stages of one run (answers, verdicts, checks,
    report) before rendering.

    Not wired to the stages yet: for now it only reports, per run, what is missing or looks
    stale, and never calls a model (so it is already what `--offline` must do).
    """
    results = spec.results_path
    evidence = sorted(spec.run_dir.glob("*.jsonl")) if spec.run_dir.is_dir() else []
    prefix = (
        "offline, no model called: " if offline else "not run (stage running is not wired yet): "
    )
    if not results.exists():
        expected = len(spec.suite.tasks) * len(spec.models)
        present = _answers_present(spec) if evidence else 0
        pairs = len(spec.models) * (len(spec.models) - 1) // 2
        verdicts = len(spec.suite.tasks) * pairs * 2 * len(spec.judges)
        return [
            f"{prefix}run {spec.name}: {results} is missing; answers {present} of {expected} "
            f"present, {verdicts} verdicts expected from {len(spec.judges)} judge(s) "
            f"(run `konkord run`, `konkord judge` and `konkord report --run {spec.name}`)"
        ]
    if evidence:
        newest = max(evidence, key=lambda p: p.stat().st_mtime_ns)
        if newest.stat().st_mtime_ns > results.stat().st_mtime_ns:
            return [
                f"{prefix}run {spec.name}: {results} is older than {newest}; it may be stale "
                f"(`konkord report --run {spec.name}` refreshes it)"
            ]
    return []


def _answers_present(spec: RunSpec) -> int:
    from konkord.evidence import EvidenceLog
    from konkord.stages.run import current_answers

    log = EvidenceLog(spec.run_dir)
    return len(current_answers(log, spec.suite, spec.settings))


def load_results_fast(path: Path, data: bytes | None = None) -> Results:
    """Parse and validate a results file in one pass of pydantic's JSON parser; any problem
    falls back to `read_results`, whose message names the file and the fix."""
    try:
        results = Results.model_validate_json(path.read_bytes() if data is None else data)
    except (ValidationError, OSError):
        return read_results(path)
    if results.schema_version != SCHEMA_VERSION:
        return read_results(path)
    return results


def _same_path(a: str | Path, b: str | Path) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def _differences(label: str, listed: list[str], found: list[str]) -> str | None:
    if sorted(listed) == sorted(found):
        return None
    only_file = sorted(set(found) - set(listed))
    only_runs = sorted(set(listed) - set(found))
    return (
        f"{label} differ (only in the results file: {', '.join(only_file) or 'none'}; "
        f"only in runs.json: {', '.join(only_runs) or 'none'})"
    )


def check_against_entry(
    entry: RunEntry, summary: RunSummary, path: Path, runs_file: Path
) -> list[str]:
    """Where a results file disagrees with its runs.json entry, each with the fix."""
    fix = (
        f"regenerate it with `konkord report --run {entry.name}`, or correct the entry in "
        f"{runs_file}"
    )
    problems = []
    if summary.run != entry.name:
        problems.append(f'it is the results of run "{summary.run}", not "{entry.name}"')
    if not _same_path(summary.suite_path, entry.suite):
        problems.append(f"its suite is {summary.suite_path}, runs.json says {entry.suite}")
    for label, listed, found in (
        ("models", list(entry.models), summary.models),
        ("judges", list(entry.judges), summary.judges),
    ):
        diff = _differences(label, listed, found)
        if diff:
            problems.append(diff)
    return [f'{path}: run "{entry.name}": {problem}; {fix}' for problem in problems]


def unlisted_results(runs: RunsFile, runs_file: Path) -> list[str]:
    """Results files in results/ that no run in runs.json claims."""
    listed = {os.path.normpath(entry.results_path) for entry in runs.runs}
    folders = {RESULTS_DIR} | {entry.results_path.parent for entry in runs.runs}
    problems = []
    for folder in sorted(folders):
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            if os.path.normpath(path) not in listed:
                problems.append(
                    f'{path}: not listed in {runs_file}; add a run named "{path.stem}" there '
                    "(with its suite, models and judges), or delete the file"
                )
    return problems


@dataclass
class LoadedRun:
    """A run checked against its entry: its summary, and its results file's hash and path."""

    entry: RunEntry
    path: Path
    sha: str
    summary: RunSummary
    cached: bool


def load_runs_checked(
    runs_file: Path, manifest: Manifest, offline: bool, progress: Progress
) -> tuple[list[LoadedRun], list[str]]:
    """Every run of runs.json with its results file, checked in both directions; all problems
    are gathered and raised together so one build shows every fix needed."""
    if not runs_file.exists():
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
        notes.extend(ensure_stages(spec_from_entry(entry), offline))
        path = entry.results_path
        if not path.exists():
            problems.append(
                f'{path}: missing, but {runs_file} lists run "{entry.name}"; create it with '
                f"`konkord report --run {entry.name}`, or remove the run from {runs_file}"
            )
            continue
        data = path.read_bytes()
        sha = sha256(data)
        cached = manifest.runs.get(entry.name, {})
        if (
            cached.get("sha") == sha
            and cached.get("summary", {}).get("schema_version") == SCHEMA_VERSION
        ):
            summary = RunSummary.from_json(cached["summary"])
            is_cached = True
        else:
            try:
                results = load_results_fast(path, data)
            except KonkordError as exc:
                problems.append(str(exc))
                continue
            validate_task_ids(results, path)
            summary = RunSummary.of(results)
            is_cached = False
        problems.extend(check_against_entry(entry, summary, path, runs_file))
        loaded.append(LoadedRun(entry, path, sha, summary, is_cached))
    problems.extend(unlisted_results(runs, runs_file))
    for note in notes:
        progress(note)
    if problems:
        raise KonkordError(
            f"{runs_file} and the results files disagree ({len(problems)} problem"
            f"{'s' if len(problems) != 1 else ''}):\n  " + "\n  ".join(problems)
        )
    return loaded, notes


def renderer_fingerprint() -> str:
    """The konkord version plus the site code itself: a changed renderer is a changed input,
    even in a development checkout where the version number did not move."""
    import konkord.site

    site_dir = Path(konkord.site.__file__).parent
    sources = [*sorted(site_dir.glob("*.py")), Path(__file__)]
    return sha256(__version__ + "".join(sha256(path.read_bytes()) for path in sources))


class SiteRenderer:
    """Renders pages through the writer, skipping every page whose inputs are unchanged."""

    def __init__(self, templates_dir: Path, writer: OutputWriter, content: dict[str, ContentFile]):
        if not (templates_dir / "base.html").is_file():
            raise KonkordError(
                f"{templates_dir}/base.html not found; run `konkord build` from the project "
                "root (the folder holding templates/ and content/)"
            )
        self.templates_dir = templates_dir
        self.env = make_environment(templates_dir)
        self.writer = writer
        self.content = content
        # Every page's menu links the content pages, so their names and titles are an input.
        self.nav_key = context_fingerprint({"nav": site_nav(content)})
        self.code_key = renderer_fingerprint()
        self._template_hashes: dict[str, str] = {}

    def template_hash(self, name: str) -> str:
        if name not in self._template_hashes:
            try:
                self._template_hashes[name] = template_hash(self.env, name)
            except jinja2.TemplateError as exc:
                raise self._template_error(exc, name) from None
        return self._template_hashes[name]

    def page_digest(self, template: str, data_key: str, content: tuple[str, ...]) -> str:
        shas = [self.content[name].sha if name in self.content else None for name in content]
        return input_hash(self.code_key, self.template_hash(template), data_key, self.nav_key, shas)

    def render(self, plan: PagePlan, digest: str) -> None:
        try:
            data = render_page(self.env, plan)
        except jinja2.TemplateError as exc:
            raise self._template_error(exc, plan.template) from None
        self.writer.write(plan.path, data, digest)

    def _template_error(self, exc: jinja2.TemplateError, template: str) -> KonkordError:
        name = getattr(exc, "name", None) or template
        line = getattr(exc, "lineno", None)
        where = f"{self.templates_dir / name}:{line}" if line else str(self.templates_dir / name)
        return KonkordError(f"{where}: {type(exc).__name__}: {exc.message or exc}")

    def keep_if_current(self, run: LoadedRun) -> dict[str, Any] | None:
        """If every page of an unchanged results file is current, keep them all without
        parsing the file; returns the run's page list, or None when something must render."""
        if not run.cached:
            return None
        cached_pages: dict[str, dict[str, Any]] = self.writer.previous.runs.get(
            run.entry.name, {}
        ).get("pages", {})
        if not cached_pages:
            return None
        digests = {
            path: self.page_digest(info["template"], run.sha, tuple(info["content"]))
            for path, info in cached_pages.items()
        }
        if not all(self.writer.is_current(path, digest) for path, digest in digests.items()):
            return None
        for path, digest in digests.items():
            self.writer.keep(path, digest)
        return cached_pages

    def render_run(self, run: LoadedRun) -> tuple[dict[str, Any], str]:
        """Parse one results file and render its out-of-date pages; returns its page list and
        a progress line."""
        results = load_results_fast(run.path)
        before = len(self.writer.written)
        pages: dict[str, dict[str, Any]] = {}
        for plan in plan_run_pages(results, self.content):
            digest = self.page_digest(plan.template, run.sha, plan.content)
            pages[plan.path] = {"template": plan.template, "content": list(plan.content)}
            if self.writer.is_current(plan.path, digest):
                self.writer.keep(plan.path, digest)
            else:
                self.render(plan, digest)
        written = len(self.writer.written) - before
        return pages, f"run {run.entry.name}: {len(pages)} pages, {written} written"

    def site_pages(self, summaries: list[RunSummary]) -> None:
        for plan in plan_site_pages(summaries, self.content):
            digest = self.page_digest(
                plan.template, context_fingerprint(plan.context), plan.content
            )
            if self.writer.is_current(plan.path, digest):
                self.writer.keep(plan.path, digest)
            else:
                self.render(plan, digest)


@dataclass(frozen=True)
class RenderJob:
    """One run to render in a worker process: everything it needs, as absolute paths."""

    run: LoadedRun
    out: Path
    templates_dir: Path
    content_dir: Path
    previous_outputs: dict[str, str]


@dataclass(frozen=True)
class RenderOutcome:
    """What a worker did, merged into the main writer afterwards."""

    pages: dict[str, Any]
    outputs: dict[str, str]
    written: list[str]
    unchanged: int
    line: str


def render_job(job: RenderJob) -> RenderOutcome:
    """Render one run in its own process (module level, so it can be pickled)."""
    writer = OutputWriter(job.out, Manifest(outputs=job.previous_outputs))
    renderer = SiteRenderer(job.templates_dir, writer, load_content(job.content_dir))
    pages, line = renderer.render_run(job.run)
    return RenderOutcome(pages, writer.current.outputs, writer.written, writer.unchanged, line)


# Below this many tasks to render, starting worker processes costs more than it saves.
PARALLEL_MIN_TASKS = 300


def _worker_count() -> int:
    """Processes to render runs with: one per CPU, or KONKORD_BUILD_WORKERS (1 = in-process)."""
    setting = os.environ.get("KONKORD_BUILD_WORKERS", "")
    if setting.isdigit() and int(setting) > 0:
        return int(setting)
    return os.cpu_count() or 1


def render_runs(
    renderer: SiteRenderer,
    runs: list[LoadedRun],
    out: Path,
    content_dir: Path,
    progress: Progress,
) -> dict[str, dict[str, Any]]:
    """Render every run that is not current, in parallel when there is enough work; returns
    each run's page list for the manifest."""
    pages: dict[str, dict[str, Any]] = {}
    todo: list[LoadedRun] = []
    for run in runs:
        kept = renderer.keep_if_current(run)
        if kept is None:
            todo.append(run)
        else:
            pages[run.entry.name] = kept
            progress(f"run {run.entry.name}: {len(kept)} pages, unchanged")
    workers = min(len(todo), _worker_count())
    if workers > 1 and sum(run.summary.tasks for run in todo) >= PARALLEL_MIN_TASKS:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        writer = renderer.writer
        jobs = [
            RenderJob(
                run,
                out.resolve(),
                renderer.templates_dir.resolve(),
                content_dir.resolve(),
                {
                    path: digest
                    for path, digest in writer.previous.outputs.items()
                    if path.startswith(f"{run.entry.name}/")
                },
            )
            for run in todo
        ]
        # forkserver, not fork: serve mode has threads running, and forking those is unsafe.
        context = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for job, outcome in zip(jobs, pool.map(render_job, jobs), strict=True):
                writer.current.outputs.update(outcome.outputs)
                writer.written.extend(outcome.written)
                writer.unchanged += outcome.unchanged
                pages[job.run.entry.name] = outcome.pages
                progress(outcome.line)
    else:
        for run in todo:
            pages[run.entry.name], line = renderer.render_run(run)
            progress(line)
    return pages


def _copy_file(writer: OutputWriter, source: Path, target: str) -> None:
    data = source.read_bytes()
    digest = sha256(data)
    if writer.is_current(target, digest):
        writer.keep(target, digest)
    else:
        writer.write(target, data, digest)


def _write_extras(writer: OutputWriter, templates_dir: Path, loaded: list[LoadedRun]) -> None:
    """Static assets, downloadable results files, _headers and .assetsignore."""
    static = templates_dir / "static"
    if static.is_dir():
        for path in sorted(p for p in static.rglob("*") if p.is_file()):
            _copy_file(writer, path, f"static/{path.relative_to(static).as_posix()}")
    for run in loaded:
        _copy_file(writer, run.path, f"results/{run.entry.name}.json")
    for name, text in (("_headers", HEADERS), (".assetsignore", ".konkord-build.json\n")):
        data = text.encode()
        writer.write(name, data, sha256(data))


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
    report = progress or (lambda _line: None)
    previous = Manifest.load(out)
    loaded, notes = load_runs_checked(runs_file, previous, offline, report)
    out.mkdir(parents=True, exist_ok=True)
    writer = OutputWriter(out, previous)
    renderer = SiteRenderer(templates_dir, writer, load_content(content_dir))
    pages = render_runs(renderer, loaded, out, content_dir, report)
    for run in loaded:
        writer.current.runs[run.entry.name] = {
            "sha": run.sha,
            "summary": run.summary.to_json(),
            "pages": pages[run.entry.name],
        }
    renderer.site_pages([run.summary for run in loaded])
    _write_extras(writer, templates_dir, loaded)
    writer.finish()
    return BuildSummary(
        runs=[run.entry.name for run in loaded],
        written=list(writer.written),
        unchanged=writer.unchanged,
        removed=list(writer.removed),
        notes=notes,
    )
