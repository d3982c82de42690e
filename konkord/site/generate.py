"""Writing the site: each run's pages rendered (`konkord.site.parallel` spreads them over
worker processes when there is enough work), the site-wide pages, and the extras a static host
needs (_headers, 404.html, assets).

Every output goes through the incremental writer, so a page whose inputs did not change is
neither rendered nor written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from pydantic import ValidationError

from konkord import __version__
from konkord.configuration.display_names import rename_data
from konkord.configuration.runs_config import RunEntry
from konkord.errors import KonkordError
from konkord.results.files import load_tasks, task_file_paths, task_files_of
from konkord.results.schema import SCHEMA_VERSION, Results, read_results
from konkord.site.incremental import OutputWriter, input_hash
from konkord.site.render import (
    CSP,
    ContentFile,
    PagePlan,
    RunSummary,
    context_fingerprint,
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


# Pages link to `x/index.html` (so they work from disk); wrangler.jsonc serves HTML as named
# (html_handling "none": no 307 per click), and these rewrites answer the folder addresses a
# person types or shares, `/` and `/run/`, with the same page, again without a redirect.
REDIRECTS = """/ /index.html 200
/*/ /:splat/index.html 200
"""
# Cloudflare matches static rules (no splat) before dynamic ones, and its runtime asks for them
# to be written first, so the 301s go between the two rewrites.
# Cloudflare takes at most 2,000 static redirects per site.
MAX_FOLDER_REDIRECTS = 1_900


def folder_pages(outputs: Iterable[str]) -> list[str]:
    """Every folder holding an index.html (runs, their tabs, task pages, content pages),
    shallowest first."""
    folders = [
        path.removesuffix("/index.html") for path in outputs if path.endswith("/index.html")
    ]
    return sorted(folders, key=lambda folder: (folder.count("/"), folder))


def redirects(outputs: Iterable[str]) -> str:
    """REDIRECTS, then a 301 from each folder address typed without its slash (`/run`,
    `/run/tasks/x`) to the folder: served as it is, the page's relative links would resolve
    one level too high, and html_handling "none" answers it 404. Cloudflare takes 2,000 static
    redirects: past MAX_FOLDER_REDIRECTS folders the deepest are left out (`konkord build`
    says how many)."""
    folders = folder_pages(outputs)[:MAX_FOLDER_REDIRECTS]
    root, splat = REDIRECTS.splitlines(keepends=True)
    return root + "".join(f"/{folder} /{folder}/ 301\n" for folder in folders) + splat


def load_results_fast(
    path: Path, data: bytes | None = None, checked: Sequence[bytes] | None = None
) -> Results:
    """Parse and validate a results file in one pass of pydantic's JSON parser; any problem
    falls back to `read_results`, whose message names the file and the fix. `checked`: its
    task files' hashes as another process checked them with these very bytes
    (`konkord.results.task_reading.load_tasks`)."""
    try:
        results = Results.model_validate_json(path.read_bytes() if data is None else data)
    except (ValidationError, OSError):
        return read_results(path)
    if results.schema_version != SCHEMA_VERSION:
        return read_results(path)
    # a large run's tasks: read as rendered
    return load_tasks(path, results, lazy=True, checked=checked)


@dataclass
class LoadedRun:
    """A run checked against its entry: its summary, and its results file's hash and path."""

    entry: RunEntry
    path: Path
    sha: str
    summary: RunSummary
    cached: bool

    @property
    def key(self) -> str:
        """What the run's pages are made from: the results file, and the names it is shown by."""
        names = self.entry.names
        return self.sha if not names else sha256(self.sha + repr(sorted(names.items())))


def run_line(run: LoadedRun, pages: dict[str, Any], written: int) -> str:
    """The progress line of one rendered run."""
    return f"run {run.entry.name}: {len(pages)} pages, {written} written"


def shown_summary(run: LoadedRun) -> RunSummary:
    """The run's summary as the runs index shows it: models and judges by display name."""
    if not run.entry.names:
        return run.summary
    return RunSummary.from_json(rename_data(run.summary.to_json(), run.entry.names))


def renderer_fingerprint() -> str:
    """The konkord version plus the site code itself: a changed renderer is a changed input,
    even in a development checkout where the version number did not move."""
    import konkord.site

    site_dir = Path(konkord.site.__file__).parent
    sources = sorted(site_dir.glob("*.py"))
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
        self._template_refs: dict[str, tuple[str, ...]] = {}

    def template_hash(self, name: str) -> str:
        if name not in self._template_hashes:
            try:
                self._template_hashes[name] = template_hash(self.env, name, self._template_refs)
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
            path: self.page_digest(info["template"], run.key, tuple(info["content"]))
            for path, info in cached_pages.items()
        }
        if not all(self.writer.is_current(path, digest) for path, digest in digests.items()):
            return None
        for path, digest in digests.items():
            self.writer.keep(path, digest)
        return cached_pages

    def render_plans(
        self, run: LoadedRun, plans: Iterable[PagePlan], pages: dict[str, dict[str, Any]]
    ) -> int:
        """Render the out-of-date pages among `plans` (one at a time), each listed in `pages`;
        returns how many were written."""
        before = len(self.writer.written)
        for plan in plans:
            digest = self.page_digest(plan.template, run.key, plan.content)
            pages[plan.path] = {"template": plan.template, "content": list(plan.content)}
            if self.writer.is_current(plan.path, digest):
                self.writer.keep(plan.path, digest)
            else:
                self.render(plan, digest)
        return len(self.writer.written) - before

    def render_run(self, run: LoadedRun) -> tuple[dict[str, Any], str]:
        """Parse one results file and render its out-of-date pages; returns its page list and
        a progress line."""
        results = load_results_fast(run.path)
        validate_task_ids(results, run.path)
        pages: dict[str, dict[str, Any]] = {}
        written = self.render_plans(
            run, plan_run_pages(results, self.content, run.entry.names), pages
        )
        # The downloadable copy of the results file is written here too (not counted among
        # the pages), so that in a parallel build each worker copies its own run's file.
        copy_results(self.writer, run)
        return pages, run_line(run, pages, written)

    def site_pages(self, summaries: list[RunSummary]) -> None:
        for plan in plan_site_pages(summaries, self.content):
            digest = self.page_digest(
                plan.template, context_fingerprint(plan.context), plan.content
            )
            if self.writer.is_current(plan.path, digest):
                self.writer.keep(plan.path, digest)
            else:
                self.render(plan, digest)


def _copy_file(writer: OutputWriter, source: Path, target: str, digest: str | None = None) -> None:
    """Copy `source` unless its copy is current; a known `digest` saves reading it first."""
    data = None
    if digest is None:
        data = source.read_bytes()
        digest = sha256(data)
    if writer.is_current(target, digest):
        writer.keep(target, digest)
    else:
        writer.write(target, source.read_bytes() if data is None else data, digest)


def results_copy(run: LoadedRun) -> str:
    """Where a run's results file is offered for download."""
    return f"results/{run.entry.name}.json"


def copy_results(writer: OutputWriter, run: LoadedRun) -> None:
    """The results file, and its task files when a large run has them (results/<run>.tasks/,
    as the file's task_files names them: a browser that fetched the file finds them there)."""
    _copy_file(writer, run.path, results_copy(run), run.sha)
    files = task_files_of(run.path.read_bytes())
    if files is None:
        return
    for task_id, source in task_file_paths(run.path, files):
        # The results file holds the hash of all its task files, so its hash and a task's id
        # name that task file's bytes: a kept copy needs no reading.
        digest = sha256(f"{run.sha}:{task_id}")
        _copy_file(writer, source, f"results/{files.folder}/{task_id}.json", digest)


def write_extras(writer: OutputWriter, templates_dir: Path, loaded: list[LoadedRun]) -> None:
    """Static assets, the downloadable results files not copied while rendering their run,
    _headers and .assetsignore."""
    static = templates_dir / "static"
    if static.is_dir():
        for path in sorted(p for p in static.rglob("*") if p.is_file()):
            _copy_file(writer, path, f"static/{path.relative_to(static).as_posix()}")
    for run in loaded:
        if results_copy(run) not in writer.current.outputs:
            copy_results(writer, run)
    for name, text in (
        ("_headers", HEADERS),
        ("_redirects", redirects(writer.current.outputs)),
        (".assetsignore", ".konkord-build.json\n"),
    ):
        data = text.encode()
        writer.write(name, data, sha256(data))
