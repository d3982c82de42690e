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
from markupsafe import Markup, escape

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
# The same test, faster: BLOCK_SYNTAX's line-start branches tried at line starts only.
BLOCK_SYNTAX_AT_LINE_START = re.compile(
    r"[ \t]*(?:[#>|<]|[-+*](?:[ \t]|$)|\d+[.)]|```|~~~|=+[ \t]*$|(?:[-*_][ \t]*){2,}$"
    r"|\[[^\]]*\]:)| {4}|\t",
    re.MULTILINE,
)


def has_block_syntax(text: str) -> bool:
    """Whether BLOCK_SYNTAX matches `text`, several times faster than searching with it (a
    search tries every position of a long answer)."""
    if "|" in text or "\r" in text or "\x00" in text:
        return True
    line_start = 0
    while True:
        if BLOCK_SYNTAX_AT_LINE_START.match(text, line_start):
            return True
        line_start = text.find("\n", line_start) + 1
        if not line_start:
            return False


def plain_paragraphs(text: str) -> Markup:
    """Text without Markdown syntax as CommonMark renders it: escaped paragraphs."""
    paragraphs = []
    for block in PARAGRAPH_BREAK.split(text.strip()):
        lines = [line.strip() for line in block.split("\n")]
        # Quotes are safe in element content; leaving them as they are matches CommonMark.
        paragraphs.append(f"<p>{html.escape(chr(10).join(lines), quote=False)}</p>\n")
    return Markup("".join(paragraphs))


# Inline syntax beyond `*` emphasis and code spans: escapes, strikethrough, underscores,
# links, autolinks, raw HTML and entities (and hard line breaks, "  \n"). Paragraphs free of
# all of it are rendered by `simple_inline`, which is what judges' rationales mostly are.
NOT_SIMPLE_INLINE = "\\~_[]<&"
SOFT_BREAK = re.compile(r" ?\n[ \t]*")
ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# Around a delimiter run, these make it only an opener (whitespace or an opening mark before,
# a letter or digit after) or only a closer (a letter or digit before, whitespace or closing
# punctuation after), so CommonMark's delimiter rules cannot pair them in any other way.
OPENER_BEFORE = frozenset(" \t\n(\"'")
CLOSER_AFTER = frozenset(" \t\n.,;:?!)\"'")


def simple_inline(content: str) -> str | None:
    """One paragraph's inline content as markdown-it renders it, when its only syntax is
    `*em*` and `**strong**` in plain alternation (opener, closer, opener...) around words,
    and `code` spans in single backticks; None for anything else, which goes to the parser."""
    # One `in` per character (a memchr each) is much faster here than a regular expression.
    if any(mark in content for mark in NOT_SIMPLE_INLINE) or "  \n" in content:
        return None
    if "\n" in content:
        # As markdown-it's newline rule does: a single space before a line break is dropped,
        # and so are spaces and tabs after it.
        content = SOFT_BREAK.sub("\n", content)
    parts: list[str] = []
    position = 0
    open_length = 0
    size = len(content)
    while True:
        star = content.find("*", position)
        tick = content.find("`", position)
        if star < 0 and tick < 0:
            break
        start = star if tick < 0 or 0 <= star < tick else tick
        parts.append(html.escape(content[position:start], quote=False))
        if start == tick:
            # A code span holds no `*`, newline or edge space, so nothing inside it is
            # parsed and its text is shown as it is.
            close = content.find("`", start + 1)
            code = content[start + 1 : close]
            if (
                close <= start + 1
                or content.startswith("`", close + 1)
                or code[0] == " "
                or code[-1] == " "
                or "*" in code
                or "\n" in code
            ):
                return None
            parts.append(f"<code>{html.escape(code, quote=False)}</code>")
            position = close + 1
            continue
        end = start + 1
        while end < size and content[end] == "*":
            end += 1
        length = end - start
        before = content[start - 1] if start else " "
        after = content[end] if end < size else " "
        if open_length == 0:
            if length > 2 or before not in OPENER_BEFORE or after not in ASCII_ALNUM:
                return None
            parts.append("<strong>" if length == 2 else "<em>")
            open_length = length
        else:
            if length != open_length or before not in ASCII_ALNUM or after not in CLOSER_AFTER:
                return None
            parts.append("</strong>" if length == 2 else "</em>")
            open_length = 0
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
        inline = simple_inline(lines)
        if inline is None:
            inline = _markdown.renderInline(lines)
        paragraphs.append(f"<p>{inline}</p>\n")
    return "".join(paragraphs)


# A code fence the shortcut renders: at the margin, three backticks, a plain language name.
FENCE_OPEN = re.compile(r"```([A-Za-z0-9_+.#-]*)")
# Inside a fence, a line like this might close it (or not): left to the parser.
FENCE_LIKE = re.compile(r" {0,3}```")
# Whitespace that Python strips but CommonMark does not count as blank; either sends a text
# with fences to the full parser, as do tabs in the first four columns outside fences.
UNUSUAL_WHITESPACE = re.compile(
    r"[\r\x00\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
)
LEADING_TAB = re.compile(r"^ {0,3}\t", re.MULTILINE)


def _paragraphs(lines: list[str]) -> str | None:
    """The text between fences, if it is paragraphs only."""
    text = "\n".join(lines)
    if not text.strip():
        return ""
    if has_block_syntax(text) or LEADING_TAB.search(text):
        return None
    return inline_paragraphs(text)


def paragraphs_and_fences(text: str) -> str | None:
    """Paragraphs and ``` code fences (the usual shape of an answer about code) as markdown-it
    renders them, without its block parser; None for anything else."""
    if UNUSUAL_WHITESPACE.search(text):
        return None
    parts: list[str] = []
    lines = text.split("\n")
    segment_start = index = 0
    while index < len(lines):
        fence = FENCE_OPEN.fullmatch(lines[index])
        if fence is None:
            index += 1
            continue
        paragraphs = _paragraphs(lines[segment_start:index])
        if paragraphs is None:
            return None
        parts.append(paragraphs)
        index += 1
        code_start = index
        while index < len(lines) and not FENCE_LIKE.match(lines[index]):
            index += 1
        if index == len(lines) or lines[index] != "```":
            return None
        code = "".join(line + "\n" for line in lines[code_start:index])
        language = f' class="language-{fence.group(1)}"' if fence.group(1) else ""
        parts.append(f"<pre><code{language}>{html.escape(code, quote=False)}</code></pre>\n")
        index += 1
        segment_start = index
    paragraphs = _paragraphs(lines[segment_start:])
    if paragraphs is None:
        return None
    parts.append(paragraphs)
    return "".join(parts)


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> Markup:
    """Markdown to safe HTML; identical texts (common across judges and runs) render once.

    Shortcuts give the same HTML as the full parser, faster: text with no Markdown at all is
    escaped into paragraphs, text with inline Markdown only skips block parsing, and so does
    text of paragraphs and code fences.
    The sanitiser runs on every output that came from the parser.
    """
    if not text.strip():
        return Markup("")
    if not MARKDOWN_SYNTAX.search(text):
        return plain_paragraphs(text)
    if not has_block_syntax(text):
        return Markup(_cleaner.clean(inline_paragraphs(text)))
    fenced = paragraphs_and_fences(text) if "```" in text else None
    if fenced is not None:
        return Markup(_cleaner.clean(fenced))
    return Markup(_cleaner.clean(_markdown.render(text)))


def sanitise_html(html: str) -> str:
    """The same allow-list for HTML from elsewhere; exposed so tests can probe it directly."""
    return str(_cleaner.clean(html))


def summary_line(text: str, limit: int = 140) -> Markup:
    """A Markdown text's first paragraph (or heading, or list item) as one line for a list of
    tasks: plain text with its code spans kept as code, every other mark dropped (raw Markdown
    would show its backticks, rendered blocks would not fit a table cell). A paragraph that
    ends in a colon before code ("Write this function:") takes the code's first line along.
    All text escaped; at most `limit` characters, cut at a word with an ellipsis."""
    tokens = _markdown.parse(text[: limit * 8])
    at = next(
        (
            i
            for i in range(1, len(tokens))
            if tokens[i].type == "inline"
            and tokens[i - 1].type in {"paragraph_open", "heading_open"}
        ),
        None,
    )
    pieces: list[tuple[str, bool]] = []  # (text, is code)
    if at is None:  # no prose at all: the first line of the first code, if any
        block = next((t.content for t in tokens if t.type in {"fence", "code_block"}), "")
        first = next((line.strip() for line in block.splitlines() if line.strip()), "")
        return Markup(f"<code>{escape(first[:limit])}</code>" if first else "")
    for child in tokens[at].children or []:
        if child.type in {"text", "code_inline"}:
            pieces.append((child.content, child.type == "code_inline"))
        elif child.type in {"softbreak", "hardbreak"}:
            pieces.append((" ", False))
        # emphasis and links: their text arrives as text children, their marks are dropped
    after = tokens[at + 2] if at + 2 < len(tokens) else None
    if pieces and pieces[-1][0].endswith(":") and after and after.type in {"fence", "code_block"}:
        first = next((line.strip() for line in after.content.splitlines() if line.strip()), "")
        pieces += [(" ", False), (first, True)] if first else []
    parts: list[str] = []
    room = limit
    for piece, code in pieces:
        if len(piece) > room:
            cut = piece[:room]
            # Whole words only, unless the first word alone is too long.
            if not code and piece[room] != " ":
                cut = cut[: cut.rfind(" ")] if " " in cut else "" if parts else cut
            if cut.strip():
                parts.append(f"<code>{escape(cut)}</code>" if code else str(escape(cut)))
            return Markup("".join(parts).strip() + "…")
        room -= len(piece)
        parts.append(f"<code>{escape(piece)}</code>" if code else str(escape(piece)))
    return Markup("".join(parts).strip())
