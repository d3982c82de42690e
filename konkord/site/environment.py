"""The Jinja side of the site: the environment every page renders in, the content pages it
reads, and the hashes that tell the incremental writer when a template or input changed."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import jinja2.runtime
import markupsafe
from markupsafe import Markup

from konkord import __version__
from konkord.site.formatting import (
    anchor,
    data_html,
    fmt_coefficient,
    fmt_interval,
    fmt_kappa,
    fmt_line_cost,
    fmt_money,
    fmt_pct,
    fmt_proportion,
    fmt_proportion_plain,
    fmt_rate,
    fmt_seconds,
    winner_text,
)
from konkord.site.markdown import render_markdown

# Opens every folded section (<details>) around the element the address names, so a link into a
# folded judge, disagreement or verdict shows it. Chromium and recent Firefox do this by
# themselves (the HTML standard's "ancestor details revealing"); this covers the browsers that
# do not. Without script the content is in the page all the same, one click away.
REVEAL_JS = """(function () {
  function reveal() {
    var id = location.hash.slice(1), target = null, opened = false;
    try { target = id && document.getElementById(decodeURIComponent(id)); } catch (e) {}
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS" && !node.open) { node.open = true; opened = true; }
    }
    if (opened) target.scrollIntoView();
  }
  addEventListener("hashchange", reveal);
  reveal();
})();"""
REVEAL_HASH = base64.b64encode(hashlib.sha256(REVEAL_JS.encode()).digest()).decode()
# The policy every page carries as a meta tag (and _headers sends as a header): nothing loads
# from elsewhere, and the one script that runs is REVEAL_JS, named by its hash, so a script
# that got into a page some other way (an answer, a rationale) is refused by the browser.
# Serve mode adds 'self' to script-src for its reload script.
SCRIPT_SRC = f"script-src 'sha256-{REVEAL_HASH}'"
CSP = (
    f"default-src 'none'; style-src 'self'; img-src 'self' data:; {SCRIPT_SRC}; "
    "base-uri 'none'; form-action 'none'"
)
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


@jinja2.pass_context
def who(context: jinja2.runtime.Context, name: str) -> str | Markup:
    """A model or judge by its display name, its full spec in a tooltip (`specs` in the page's
    context maps one to the other); a name without a spec of its own is shown as it is."""
    specs = context.get("specs") or {}
    spec = specs.get(name) if isinstance(name, str) else None
    if spec is None:
        return name
    return Markup('<span class="who" title="{}">{}</span>').format(spec, name)


# Short texts escaped before, kept: a task page outputs the same model names, anchors and labels
# hundreds of times. Bounded, so a build of many distinct short texts holds at most this many.
_ESCAPED: dict[str, Markup] = {}
ESCAPED_MAX = 20_000
ESCAPED_LENGTH = 200


def escape(value: object) -> Markup:
    """`markupsafe.escape`, the same text for every value, made cheaper for what a page outputs
    most: text already safe (a macro's output, a rendered answer) is passed on as it is, not
    copied, and a short plain text is escaped once per process."""
    if type(value) is Markup:
        return value
    if type(value) is not str:
        return markupsafe.escape(value)
    found = _ESCAPED.get(value)
    if found is None:
        found = markupsafe.escape(value)
        if len(value) <= ESCAPED_LENGTH and len(_ESCAPED) < ESCAPED_MAX:
            _ESCAPED[value] = found
    return found


def once_per_page(macro: Any) -> Any:
    """`macro` with its output kept for the page being rendered: called again with the same
    objects and options, it gives the same markup without rendering it again. A task page of
    20 models shows each answer's card in every notable pair it is in (68 cards of 20 answers
    at 34 pairs), the same bytes each time: about a tenth of rendering the task. Made in the
    page (`{% set card = once_per_page(answer_card) %}`), so nothing outlives it; keyed by
    the objects' identity, each object held with its markup so that no other can take its
    identity meanwhile."""
    made: dict[tuple[tuple[int, ...], tuple[tuple[str, Any], ...]], tuple[Any, Any]] = {}

    def call(*args: Any, **options: Any) -> Any:
        key = (tuple(map(id, args)), tuple(sorted(options.items())))
        found = made.get(key)
        if found is None:
            found = made[key] = (args, macro(*args, **options))
        return found[1]

    return call


class FastEscapeTemplate(jinja2.Template):
    """A template whose `{{ ... }}` escapes with `escape` above: the compiled code calls the
    name `escape` of its module (jinja2.runtime's, markupsafe's), which is replaced there."""

    @classmethod
    def from_code(cls, *args: Any, **kwargs: Any) -> jinja2.Template:
        template = super().from_code(*args, **kwargs)
        template.root_render_func.__globals__["escape"] = escape
        return template


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
    env.template_class = FastEscapeTemplate
    env.filters.update(
        md=render_markdown,
        pct=fmt_pct,
        interval=fmt_interval,
        proportion=fmt_proportion,
        rate=fmt_rate,
        proportion_plain=fmt_proportion_plain,
        kappa=fmt_kappa,
        coefficient=fmt_coefficient,
        money=fmt_money,
        cost=fmt_line_cost,
        seconds=fmt_seconds,
        winner=winner_text,
        who=who,
    )
    env.globals.update(
        anchor=anchor,
        csp=Markup(CSP),
        reveal_js=Markup(REVEAL_JS),
        site_version=__version__,
        data_html=data_html,
        once_per_page=once_per_page,
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
    """Hash of a template and everything it pulls in: the part of a page's inputs it owns.
    The policy counts too: it names the script's hash, which every page carries."""
    assert env.loader is not None
    digest = hashlib.sha256(CSP.encode())
    for member in template_closure(env, name, parsed):
        source, _, _ = env.loader.get_source(env, member)
        digest.update(member.encode() + b"\x00" + source.encode() + b"\x00")
    return digest.hexdigest()
