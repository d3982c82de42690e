"""From results files to pages: every page's context is built first, then templates render it.

Templates format; they compute nothing the results file does not hold. Page paths are
directory-style (`<run>/tasks/<task>/index.html`) and every link inside a page is relative
to that page (`root`), so the site works from any static host and from a local server.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from markupsafe import Markup
from pydantic import BaseModel

from konkord import __version__
from konkord.results import Calibration, JudgeBlock, Results
from konkord.site.formatting import (
    anchor,
    data_html,
    fmt_interval,
    fmt_kappa,
    fmt_money,
    fmt_pct,
    fmt_proportion,
    fmt_seconds,
    winner_text,
)
from konkord.site.markdown import render_markdown
from konkord.site.svg import ForestRow, forest_plot, heatmap

# The policy every page carries as a meta tag (and _headers sends as a header): nothing runs,
# nothing loads from elsewhere. Serve mode swaps `script-src 'none'` for its reload script.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)
RESERVED_NAMES = frozenset({"static", "results", "about", "404"})
METHODOLOGY_CONTENT = "methodology.md"


@dataclass(frozen=True)
class ContentFile:
    """A Markdown page from content/: trusted prose, still rendered through the sanitiser."""

    name: str
    text: str
    sha: str

    @property
    def slug(self) -> str:
        return self.name.removesuffix(".md")

    @property
    def title(self) -> str:
        for line in self.text.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
        return self.slug.replace("-", " ").capitalize()


@dataclass(frozen=True)
class PagePlan:
    """One page to write: where, with which template, from which context and content files."""

    path: str
    template: str
    context: Mapping[str, Any]
    content: tuple[str, ...] = ()


class _SuiteHead(BaseModel):
    name: str
    path: str
    task_count: int


class _RatingHead(BaseModel):
    model: str
    rank: int


class _CalibrationHead(BaseModel):
    status: str


class _JudgeBlockHead(BaseModel):
    ratings: list[_RatingHead]
    calibration: _CalibrationHead


class ResultsHead(BaseModel):
    """The few fields of a results file that its summary needs. Validating only these from
    the JSON is five times faster than json.loads, which builds the whole file's objects."""

    schema_version: int
    run: str
    suite: _SuiteHead
    models: list[str]
    judges: list[str]
    evidence_date: str | None
    konkord_version: str
    simulated: bool
    judge_blocks: list[_JudgeBlockHead]


@dataclass(frozen=True)
class RunSummary:
    """What the runs index and site-wide pages need of a run, cached so unchanged runs are not
    parsed again."""

    run: str
    suite: str
    suite_path: str
    models: list[str]
    judges: list[str]
    date: str | None
    konkord_version: str
    simulated: bool
    schema_version: int
    tasks: int
    calibrated: list[bool] = field(default_factory=list)
    leader: str | None = None

    @classmethod
    def of(cls, results: Results) -> RunSummary:
        first = results.judge_blocks[0] if results.judge_blocks else None
        leaders = [r.model for r in first.ratings if r.rank == 1] if first else []
        return cls(
            run=results.run,
            suite=results.suite.name,
            suite_path=results.suite.path,
            models=list(results.models),
            judges=list(results.judges),
            date=results.evidence_date,
            konkord_version=results.konkord_version,
            simulated=results.simulated,
            schema_version=results.schema_version,
            tasks=results.suite.task_count,
            calibrated=[b.calibration.status == "calibrated" for b in results.judge_blocks],
            leader=", ".join(leaders) or None,
        )

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunSummary:
        """The same summary from the file's raw JSON, without validating the whole file (the
        full check happens when its pages render); KeyError or TypeError if malformed."""
        blocks = data["judge_blocks"]
        ratings = blocks[0]["ratings"] if blocks else []
        leaders = [r["model"] for r in ratings if r["rank"] == 1]
        return cls(
            run=str(data["run"]),
            suite=str(data["suite"]["name"]),
            suite_path=str(data["suite"]["path"]),
            models=[str(m) for m in data["models"]],
            judges=[str(j) for j in data["judges"]],
            date=data["evidence_date"],
            konkord_version=str(data["konkord_version"]),
            simulated=bool(data["simulated"]),
            schema_version=int(data["schema_version"]),
            tasks=int(data["suite"]["task_count"]),
            calibrated=[b["calibration"]["status"] == "calibrated" for b in blocks],
            leader=", ".join(leaders) or None,
        )

    @classmethod
    def from_results_json(cls, data: bytes) -> RunSummary:
        """The summary straight from a results file's bytes; ValueError (pydantic's
        ValidationError among them) if the fields it needs are missing or malformed."""
        return cls.from_data(ResultsHead.model_validate_json(data).model_dump())

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        return cls(**data)


def sha256(data: bytes | str) -> str:
    """Hex digest, the one hash used for every input and output."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def load_content(content_dir: Path) -> dict[str, ContentFile]:
    """Every content/*.md, by file name, in a stable order."""
    files: dict[str, ContentFile] = {}
    if content_dir.is_dir():
        for path in sorted(content_dir.glob("*.md")):
            text = path.read_text(encoding="utf-8")
            files[path.name] = ContentFile(path.name, text, sha256(text))
    return files


def make_environment(templates_dir: Path) -> jinja2.Environment:
    """The Jinja environment: autoescape always on, undefined names are errors, not blanks.

    One environment serves one build (serve mode makes a new one per rebuild), so templates
    are not checked for changes on every page (three file stats per page otherwise).
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        auto_reload=False,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        md=render_markdown,
        pct=fmt_pct,
        interval=fmt_interval,
        proportion=fmt_proportion,
        kappa=fmt_kappa,
        money=fmt_money,
        seconds=fmt_seconds,
        winner=winner_text,
    )
    env.globals.update(
        anchor=anchor, csp=Markup(CSP), site_version=__version__, data_html=data_html
    )
    return env


def template_closure(
    env: jinja2.Environment, name: str, parsed: dict[str, tuple[str, ...]] | None = None
) -> list[str]:
    """A template and every template it extends, includes or imports, sorted. `parsed`, if
    given, keeps each template's references between calls (base.html is in every closure)."""
    assert env.loader is not None
    parsed = {} if parsed is None else parsed
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current not in parsed:
            source, _, _ = env.loader.get_source(env, current)
            refs = jinja2.meta.find_referenced_templates(env.parse(source))
            parsed[current] = tuple(ref for ref in refs if ref is not None)
        todo.extend(parsed[current])
    return sorted(seen)


def template_hash(
    env: jinja2.Environment, name: str, parsed: dict[str, tuple[str, ...]] | None = None
) -> str:
    """Hash of a template and everything it pulls in: the part of a page's inputs it owns."""
    assert env.loader is not None
    digest = hashlib.sha256()
    for member in template_closure(env, name, parsed):
        source, _, _ = env.loader.get_source(env, member)
        digest.update(member.encode() + b"\x00" + source.encode() + b"\x00")
    return digest.hexdigest()


# -- contexts -----------------------------------------------------------------------------------


def _root(depth: int) -> str:
    return "../" * depth or "./"


def site_nav(content: Mapping[str, ContentFile]) -> list[dict[str, str]]:
    """Links to the content pages (about...), shown on every page."""
    return [
        {"slug": f.slug, "title": f.title}
        for f in content.values()
        if f.name != METHODOLOGY_CONTENT
    ]


def run_header(results: Results) -> dict[str, Any]:
    """What every page of a run names: the run, judge(s), suite, evidence date, versions."""
    return {
        "run": results.run,
        "suite": results.suite,
        "judges": results.judges,
        "date": results.evidence_date or "no evidence date",
        "konkord_version": results.konkord_version,
        "simulated": results.simulated,
        "schema_version": results.schema_version,
    }


def judge_sections(results: Results) -> list[dict[str, Any]]:
    """One entry per judge: its block and the id other pages link to."""
    return [
        {"block": block, "id": f"judge-{index + 1}", "number": index + 1}
        for index, block in enumerate(results.judge_blocks)
    ]


def _leaderboard_section(results: Results, block: JudgeBlock) -> dict[str, Any]:
    costs = {line.who: line for line in results.cost if line.role == "generation"}
    group_sizes: dict[int, int] = {}
    for rating in block.ratings:
        group_sizes[rating.rank_group] = group_sizes.get(rating.rank_group, 0) + 1
    rows = [
        {
            "rating": rating,
            "tied": group_sizes[rating.rank_group] > 1,
            "cost": costs.get(rating.model),
        }
        for rating in block.ratings
    ]
    forest = forest_plot(
        [
            ForestRow(
                r.model,
                r.win_rate_vs_field.estimate,
                r.win_rate_vs_field.low,
                r.win_rate_vs_field.high,
                r.rank_group,
            )
            for r in block.ratings
        ],
        f"Expected win rate against the field, 95% intervals, judge {block.judge}",
    )
    order = [r.model for r in block.ratings]
    grid = heatmap(
        order,
        block.p_above_matrix,
        f"P(row model above column model), judge {block.judge}",
    )
    judge_cost = [line for line in results.cost if line.role == "judge" and line.who == block.judge]
    return {
        "rows": rows,
        "forest": forest,
        "heatmap": grid,
        "order": order,
        "judge_cost": judge_cost[0] if judge_cost else None,
    }


def leaderboard_context(results: Results) -> dict[str, Any]:
    sections = judge_sections(results)
    for section in sections:
        section.update(_leaderboard_section(results, section["block"]))
    return {
        "sections": sections,
        "pass_rates": results.pass_rates,
        "cost": results.cost,
        "results_href": f"results/{results.run}.json",
    }


def methodology_context(results: Results, content: Mapping[str, ContentFile]) -> dict[str, Any]:
    prose = content.get(METHODOLOGY_CONTENT)
    return {
        "sections": judge_sections(results),
        "prose": render_markdown(prose.text) if prose else None,
    }


def calibration_context(results: Results) -> dict[str, Any]:
    sections = judge_sections(results)
    for section in sections:
        calibration: Calibration = section["block"].calibration
        section["calibration"] = calibration
        section["objective"] = calibration.objective
    return {"sections": sections}


def tasks_index_context(results: Results) -> dict[str, Any]:
    rows = []
    for task in results.tasks:
        flips = sum(1 for c in task.comparisons if c.flipped)
        labels = sum(len(c.labels) for c in task.comparisons)
        first_line = task.prompt.strip().splitlines()[0] if task.prompt.strip() else ""
        rows.append(
            {
                "task": task,
                "summary": first_line[:140] + ("…" if len(first_line) > 140 else ""),
                "flips": flips,
                "labels": labels,
                "comparisons": len(task.comparisons),
            }
        )
    return {"rows": rows}


def task_context(results: Results, index: int) -> dict[str, Any]:
    task = results.tasks[index]
    judge_ids = {s["block"].judge: s["id"] for s in judge_sections(results)}
    by_judge: dict[str, list[Any]] = {}
    for comparison in task.comparisons:
        by_judge.setdefault(comparison.judge, []).append(comparison)
    groups = [
        {"judge": judge, "id": judge_ids.get(judge, anchor("judge", judge)), "comparisons": items}
        for judge, items in by_judge.items()
    ]
    previous_task = results.tasks[index - 1].id if index > 0 else None
    next_task = results.tasks[index + 1].id if index + 1 < len(results.tasks) else None
    return {
        "task": task,
        "groups": groups,
        "previous_task": previous_task,
        "next_task": next_task,
    }


def plan_run_pages(results: Results, content: Mapping[str, ContentFile]) -> list[PagePlan]:
    """Every page of one run, contexts complete, nothing rendered yet."""
    run = results.run
    header = {**run_header(results), "nav": site_nav(content)}

    def page(
        path: str, template: str, tab: str, extra: dict[str, Any], used: tuple[str, ...] = ()
    ) -> PagePlan:
        depth = path.count("/")
        context = {
            **header,
            **extra,
            "tab": tab,
            "root": _root(depth),
            "run_root": _root(depth - 1),
        }
        return PagePlan(path, template, context, used)

    pages = [
        page(f"{run}/index.html", "leaderboard.html", "leaderboard", leaderboard_context(results)),
        page(
            f"{run}/methodology/index.html",
            "methodology.html",
            "methodology",
            methodology_context(results, content),
            (METHODOLOGY_CONTENT,),
        ),
        page(
            f"{run}/calibration/index.html",
            "calibration.html",
            "calibration",
            calibration_context(results),
        ),
        page(f"{run}/tasks/index.html", "tasks.html", "tasks", tasks_index_context(results)),
    ]
    for index, task in enumerate(results.tasks):
        pages.append(
            page(
                f"{run}/tasks/{task.id}/index.html",
                "task.html",
                "tasks",
                task_context(results, index),
            )
        )
    return pages


def plan_site_pages(
    summaries: Sequence[RunSummary], content: Mapping[str, ContentFile]
) -> list[PagePlan]:
    """The runs index, the content pages and the 404 page: the pages not owned by one run."""
    any_simulated = any(s.simulated for s in summaries)
    base = {"any_simulated": any_simulated, "nav": site_nav(content)}
    pages = [
        PagePlan(
            "index.html",
            "index.html",
            {**base, "root": "./", "runs": [s.to_json() for s in summaries]},
        )
    ]
    for item in content.values():
        if item.name == METHODOLOGY_CONTENT:
            continue
        pages.append(
            PagePlan(
                f"{item.slug}/index.html",
                "page.html",
                {**base, "root": "../", "title": item.title, "body": render_markdown(item.text)},
                (item.name,),
            )
        )
    # The 404 page is served at any depth, so its links are absolute.
    pages.append(PagePlan("404.html", "404.html", {**base, "root": "/"}))
    return pages


def render_page(env: jinja2.Environment, plan: PagePlan) -> bytes:
    """One page's bytes; the same plan always gives the same bytes."""
    return env.get_template(plan.template).render(**plan.context).encode("utf-8")


def context_fingerprint(context: Mapping[str, Any]) -> str:
    """Hash of a site-wide page's context (plain JSON data), one of its inputs."""
    return sha256(json.dumps(context, sort_keys=True, default=str))


def validate_task_ids(results: Results, source: Path) -> None:
    """Task ids become directory names: refuse anything that could escape the run's folder."""
    from konkord.errors import KonkordError
    from konkord.suite import SLUG

    for task in results.tasks:
        if not SLUG.match(task.id):
            raise KonkordError(
                f'{source}: task id "{task.id}" cannot be a page name (use lower case, digits, '
                "'-', '_' or '.'); fix the suite and regenerate with `konkord report`"
            )
