"""Markdown for untrusted text (answers, rationales, prompts): rendered, then sanitised.

Raw HTML in the Markdown is shown as text (markdown-it's `html` option is off), and the output
still goes through nh3 with a short allow-list, so a hostile answer can neither run script nor
load anything: no script, no event handlers, no javascript: URLs, no iframes, forms or images.
"""

from __future__ import annotations

import html
import re
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


# Anything that could be Markdown syntax sends a text through the full parser; text free of
# all of it (most short rationales) is just paragraphs, rendered by escaping, five times faster.
MARKDOWN_SYNTAX = re.compile(
    r"[*_`\[\]<>#|~\\!&:]|^[ \t]*(?:[-+=]|\d+[.)])|^(?: {4}|\t)| {2,}$|\r", re.MULTILINE
)
PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")
# Text with none of these is a run of paragraphs: only the inline parser is needed for it.
BLOCK_SYNTAX = re.compile(
    r"^[ \t]*(?:[#>|<]|[-+*](?:[ \t]|$)|\d+[.)]|```|~~~|=+[ \t]*$|(?:[-*_][ \t]*){2,}$"
    r"|\[[^\]]*\]:)|^(?: {4}|\t)|\||\r|\x00",
    re.MULTILINE,
)


def plain_paragraphs(text: str) -> Markup:
    """Text without Markdown syntax as CommonMark renders it: escaped paragraphs."""
    paragraphs = []
    for block in PARAGRAPH_BREAK.split(text.strip()):
        lines = [line.strip() for line in block.split("\n")]
        # Quotes are safe in element content; leaving them as they are matches CommonMark.
        paragraphs.append(f"<p>{html.escape(chr(10).join(lines), quote=False)}</p>\n")
    return Markup("".join(paragraphs))


# Inline syntax other than `*` emphasis: escapes, code spans, strikethrough, underscores,
# links, autolinks, raw HTML and entities, and hard line breaks. Paragraphs free of all of it
# are rendered by `simple_emphasis`, which is what judges' rationales mostly are.
NOT_SIMPLE_EMPHASIS = re.compile(r"[\\`~_\[\]<&]|  \n")
STAR_RUN = re.compile(r"\*+")
SOFT_BREAK = re.compile(r" ?\n[ \t]*")
ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# Around a delimiter run, these make it only an opener (whitespace or an opening mark before,
# a letter or digit after) or only a closer (a letter or digit before, whitespace or closing
# punctuation after), so CommonMark's delimiter rules cannot pair them in any other way.
OPENER_BEFORE = frozenset(" \t\n(\"'")
CLOSER_AFTER = frozenset(" \t\n.,;:?!)\"'")


def simple_emphasis(content: str) -> str | None:
    """One paragraph's inline content as markdown-it renders it, when its only syntax is
    `*em*` and `**strong**` in plain alternation (opener, closer, opener...) around words;
    None for anything else, which goes to the parser."""
    if NOT_SIMPLE_EMPHASIS.search(content):
        return None
    # As markdown-it's newline rule does: a single space before a line break is dropped, and
    # so are spaces and tabs after it.
    content = SOFT_BREAK.sub("\n", content)
    parts: list[str] = []
    position = 0
    open_length = 0
    for run in STAR_RUN.finditer(content):
        start, end = run.span()
        length = end - start
        before = content[start - 1] if start else " "
        after = content[end] if end < len(content) else " "
        if open_length == 0:
            if length > 2 or before not in OPENER_BEFORE or after not in ASCII_ALNUM:
                return None
            tag = "<strong>" if length == 2 else "<em>"
            open_length = length
        else:
            if length != open_length or before not in ASCII_ALNUM or after not in CLOSER_AFTER:
                return None
            tag = "</strong>" if length == 2 else "</em>"
            open_length = 0
        parts.append(html.escape(content[position:start], quote=False))
        parts.append(tag)
        position = end
    if open_length:
        return None
    parts.append(html.escape(content[position:], quote=False))
    return "".join(parts)


def inline_paragraphs(text: str) -> str:
    """Paragraph-only Markdown as CommonMark renders it, skipping the block parser."""
    paragraphs = []
    for block in PARAGRAPH_BREAK.split(text.strip()):
        lines = "\n".join(line.lstrip() for line in block.split("\n")).rstrip()
        inline = simple_emphasis(lines)
        if inline is None:
            inline = _markdown.renderInline(lines)
        paragraphs.append(f"<p>{inline}</p>\n")
    return "".join(paragraphs)


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> Markup:
    """Markdown to safe HTML; identical texts (common across judges and runs) render once.

    Two shortcuts give the same HTML as the full parser, faster: text with no Markdown at
    all is escaped into paragraphs, and text with inline Markdown only skips block parsing.
    The sanitiser runs on every output that came from the parser.
    """
    if not text.strip():
        return Markup("")
    if not MARKDOWN_SYNTAX.search(text):
        return plain_paragraphs(text)
    if not BLOCK_SYNTAX.search(text):
        return Markup(_cleaner.clean(inline_paragraphs(text)))
    return Markup(_cleaner.clean(_markdown.render(text)))


def sanitise_html(html: str) -> str:
    """The same allow-list for HTML from elsewhere; exposed so tests can probe it directly."""
    return str(_cleaner.clean(html))
