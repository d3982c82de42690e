"""From results files to pages: every page's context is built first, then templates render it.

Templates format; they compute nothing the results file does not hold. Page paths are
directory-style (`<run>/tasks/<task>/index.html`) and every link inside a page is relative
to that page (`root`), so the site works from any static host and from a local server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from konkord.configuration.display_names import renamed, specs_by_name
from konkord.results.files import TaskShelf, task_ids
from konkord.results.schema import Results
from konkord.results.task_structs import renamed_task
from konkord.site.contexts import (
    calibration_context,
    leaderboard_context,
    methodology_context,
    run_header,
    site_nav,
)
from konkord.site.environment import (
    CSP,
    METHODOLOGY_CONTENT,
    SCRIPT_SRC,
    ContentFile,
    load_content,
    make_environment,
    sha256,
    template_hash,
)
from konkord.site.folding import is_folded
from konkord.site.judges_page import judges_across_runs, judges_context
from konkord.site.markdown import render_markdown
from konkord.site.summary import RunSummary
from konkord.site.task_pages import (
    other_verdicts_context,
    task_context,
    task_index_row,
)

# Re-exported: build.py, generate.py, serve.py and the tests import these from here.
__all__ = [
    "CSP",
    "RESERVED_NAMES",
    "SCRIPT_SRC",
    "ContentFile",
    "PagePlan",
    "RunPlanner",
    "RunSummary",
    "context_fingerprint",
    "load_content",
    "make_environment",
    "plan_run_pages",
    "plan_site_pages",
    "render_page",
    "sha256",
    "site_nav",
    "template_hash",
    "validate_task_ids",
]

RESERVED_NAMES = frozenset({"static", "results", "about", "404"})


@dataclass(frozen=True)
class PagePlan:
    """One page to write: where, with which template, from which context and content files."""

    path: str
    template: str
    context: Mapping[str, Any]
    content: tuple[str, ...] = ()


def who_is_who(results: Results, names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every model and judge of the run by role: the name the pages use and its full spec."""
    first_pass = [b.cascade.first_pass for b in results.judge_blocks if b.cascade is not None]
    roles = [
        *((m, "model") for m in results.models),
        *((j, "judge") for j in results.judges),
        *((f, "first-pass judge") for f in dict.fromkeys(first_pass)),
    ]
    groups: dict[str, list[dict[str, str]]] = {}
    for spec, role in roles:
        groups.setdefault(role, []).append({"name": names.get(spec, spec), "spec": spec})
    return [{"role": role, "members": members} for role, members in groups.items()]


def _root(depth: int) -> str:
    return "../" * depth or "./"


class RunPlanner:
    """The pages of one run, planned in parts: its own pages (`head`), any slice of its task
    pages (`tasks`), then the task index (`index`) from the rows the task pages left. A whole
    run is `plan_run_pages`; a large one is split between worker processes by task slices.
    With display `names` (full spec -> name, from runs.json) the pages show the names; each
    keeps its full spec in a tooltip, and the methodology page lists them all once."""

    def __init__(
        self,
        results: Results,
        content: Mapping[str, ContentFile],
        names: Mapping[str, str] | None = None,
    ) -> None:
        names = names or {}
        self.lineup = who_is_who(results, names)
        tasks = results.tasks
        if isinstance(tasks, TaskShelf):  # a large run's tasks, renamed one at a time as read
            results = renamed(results.model_copy(update={"tasks": []}), names)
            shelf = tasks.showing(lambda task: renamed_task(task, names)) if names else tasks
            results = results.model_copy(update={"tasks": shelf})
        else:
            results = renamed(results, names)
        self.results = results
        self.content = content
        self.header = {
            **run_header(results),
            "nav": site_nav(content),
            "specs": specs_by_name(names),
        }

    def page(
        self, path: str, template: str, tab: str, extra: dict[str, Any], used: tuple[str, ...] = ()
    ) -> PagePlan:
        depth = path.count("/")
        context = {
            **self.header,
            **extra,
            "tab": tab,
            "root": _root(depth),
            "run_root": _root(depth - 1),
        }
        return PagePlan(path, template, context, used)

    def head(self) -> Iterator[PagePlan]:
        """The run's own pages: leaderboard, methodology, calibration and judges."""
        results, run = self.results, self.results.run
        yield self.page(
            f"{run}/index.html", "leaderboard.html", "leaderboard", leaderboard_context(results)
        )
        yield self.page(
            f"{run}/methodology/index.html",
            "methodology.html",
            "methodology",
            {**methodology_context(results, self.content), "lineup": self.lineup},
            (METHODOLOGY_CONTENT,),
        )
        yield self.page(
            f"{run}/calibration/index.html",
            "calibration.html",
            "calibration",
            calibration_context(results),
        )
        yield self.page(
            f"{run}/judges/index.html", "judges.html", "judges", judges_context(results)
        )

    def tasks(self, indices: range, rows: list[dict[str, Any]]) -> Iterator[PagePlan]:
        """The pages of the tasks at `indices` (one at a time: a task page's context, 190 pairs
        at 20 models, is gone once its page is written), each task's index row appended to
        `rows`."""
        results, run = self.results, self.results.run
        for index in indices:
            task = results.tasks[index]
            rows.append(task_index_row(task))
            yield self.page(
                f"{run}/tasks/{task.id}/index.html",
                "task.html",
                "tasks",
                task_context(results, index),
            )
            if is_folded(task):
                yield self.page(
                    f"{run}/tasks/{task.id}/verdicts/index.html",
                    "task_verdicts.html",
                    "tasks",
                    other_verdicts_context(results, index),
                )

    def index(self, rows: list[dict[str, Any]]) -> PagePlan:
        """The task index, from every task's row in the run's order."""
        return self.page(
            f"{self.results.run}/tasks/index.html", "tasks.html", "tasks", {"rows": rows}
        )


def plan_run_pages(
    results: Results, content: Mapping[str, ContentFile], names: Mapping[str, str] | None = None
) -> Iterator[PagePlan]:
    """Every page of one run, contexts complete, nothing rendered yet: one at a time, so a
    task page's context is gone once its page is written. The task index is made from the
    tasks as their pages are (a large run's are read from their files one at a time), so it
    comes after them."""
    planner = RunPlanner(results, content, names)
    yield from planner.head()
    rows: list[dict[str, Any]] = []
    yield from planner.tasks(range(len(planner.results.tasks)), rows)
    yield planner.index(rows)


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
            {
                **base,
                "root": "./",
                "runs": [s.to_json() for s in summaries],
                "judges_across_runs": judges_across_runs(summaries),
            },
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
    # The 404 page is served for a missing address at any depth, so its links are absolute
    # (templates/404.html says why that is right for the server and harmless from disk).
    pages.append(PagePlan("404.html", "404.html", {**base, "root": "/"}))
    return pages


# A link to a folder (`../`, `tasks/x/`, `calibration/#judge-1`), not to a file or another site.
FOLDER_LINK = re.compile(r'href="((?:[^":#?]*/)?)(#[^"]*)?"')
# Only the links FOLDER_LINK changes (a page's many `#anchor` links are not even looked at), and
# what would make the two differ: a link within the page whose anchor ends in `href=`.
FOLDER_LINK_ONLY = re.compile(r'href="([^":#?]*/)(#[^"]*)?"')
ANCHOR_ENDING_IN_HREF = re.compile(r'href="#[^"]*href="')


def file_links(html: str) -> str:
    """Point every folder link at the folder's index.html.

    Opened from disk (file://), a folder link shows a directory listing, not the page. The
    deployed site serves `x/index.html` with no redirect (wrangler.jsonc: html_handling
    "none", and _redirects maps `/x/` to `/x/index.html` for addresses typed by hand).
    """
    if ANCHOR_ENDING_IN_HREF.search(html) is None:  # the same as below, without a call a link
        return FOLDER_LINK_ONLY.sub(r'href="\1index.html\2"', html)
    return FOLDER_LINK.sub(
        lambda m: f'href="{m.group(1)}index.html{m.group(2) or ""}"' if m.group(1) else m.group(0),
        html,
    )


def render_page(env: jinja2.Environment, plan: PagePlan) -> bytes:
    """One page's bytes; the same plan always gives the same bytes."""
    return file_links(env.get_template(plan.template).render(**plan.context)).encode("utf-8")


def context_fingerprint(context: Mapping[str, Any]) -> str:
    """Hash of a site-wide page's context (plain JSON data), one of its inputs."""
    return sha256(json.dumps(context, sort_keys=True, default=str))


def validate_task_ids(results: Results, source: Path) -> None:
    """Task ids become directory names: refuse anything that could escape the run's folder."""
    from konkord.configuration.names import SLUG
    from konkord.errors import KonkordError

    for task_id in task_ids(results.tasks):
        if not SLUG.match(task_id):
            raise KonkordError(
                f'{source}: task id "{task_id}" cannot be a page name (use lower case, digits, '
                "'-', '_' or '.'); fix the suite and regenerate with `konkord report`"
            )
