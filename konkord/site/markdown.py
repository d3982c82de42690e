"""Markdown for untrusted text (answers, rationales, prompts): rendered, then sanitised.

Raw HTML in the Markdown is shown as text (markdown-it's `html` option is off), and the output
still goes through nh3 with a short allow-list, so a hostile answer can neither run script nor
load anything: no script, no event handlers, no javascript: URLs, no iframes, forms or images.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

ALLOWED_TAGS = {
    "a", "p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_markdown.enable("table").enable("strikethrough")
# Images would load from wherever the answer points; the alt text is kept as a plain link.
_markdown.disable("image")

_cleaner = nh3.Cleaner(
    tags=ALLOWED_TAGS,
    clean_content_tags={"script", "style"},
    attributes=ALLOWED_ATTRIBUTES,
    url_schemes={"http", "https", "mailto"},
    link_rel="nofollow noopener noreferrer",
    strip_comments=True,
)


@lru_cache(maxsize=8192)
def render_markdown(text: str) -> Markup:
    """Markdown to safe HTML; identical texts (common across judges and runs) render once."""
    return Markup(_cleaner.clean(_markdown.render(text)))


def sanitise_html(html: str) -> str:
    """The same allow-list for HTML from elsewhere; exposed so tests can probe it directly."""
    return str(_cleaner.clean(html))
