"""The cheaper forms of what renders every page give the same text as the plain ones: the site's
escape as markupsafe's, the pairs' attribute-dicts as dicts, the folder links' rewrite as the
one-call-a-link form, a macro kept once per page as called each time."""

from __future__ import annotations

import random
import re
from pathlib import Path

import markupsafe
import pytest
from markupsafe import Markup

from konkord.site import environment
from konkord.site.environment import escape, make_environment
from konkord.site.render import FOLDER_LINK, file_links
from konkord.site.task_pages import Fields


class Shown:
    def __html__(self) -> str:
        return "<b>shown</b>"


class Tagged(Markup):
    pass


@pytest.mark.parametrize(
    "value",
    [
        "<script>alert('x') & \"y\"</script>",
        "plain",
        "",
        "é<" * 500,  # longer than what is kept
        Markup("<em>safe</em>"),
        Tagged("<i>safe too</i>"),
        Shown(),
        42,
        1.5,
        None,
    ],
)
def test_escape_gives_markupsafe_text(value: object) -> None:
    for _ in range(2):  # once made, once kept
        got = escape(value)
        assert type(got) is Markup
        assert str(got) == str(markupsafe.escape(value))


def test_kept_texts_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "_ESCAPED", {})
    monkeypatch.setattr(environment, "ESCAPED_MAX", 3)
    for n in range(10):
        assert escape(f"<{n}>") == f"&lt;{n}&gt;"
    assert len(environment._ESCAPED) == 3


def test_templates_escape_with_it(tmp_path: Path) -> None:
    (tmp_path / "page.html").write_text(
        "{{ text }}|{{ safe }}|{% macro m() %}<p>{% endmacro %}{{ m() }}"
    )
    env = make_environment(tmp_path)
    template = env.get_template("page.html")
    assert template.root_render_func.__globals__["escape"] is escape
    rendered = template.render(text="<a href='x'>", safe=Markup("<br>"))
    assert rendered == "&lt;a href=&#39;x&#39;&gt;|<br>|<p>"


def test_fields_read_as_keys_and_as_attributes(tmp_path: Path) -> None:
    pair = Fields(model_a="m1", notable=False, labels=[])
    assert vars(pair) is pair  # its attributes are its keys
    assert pair["model_a"] == "m1"
    assert pair == {"model_a": "m1", "notable": False, "labels": []}
    assert list(pair.items()) == [("model_a", "m1"), ("notable", False), ("labels", [])]
    (tmp_path / "page.html").write_text(
        "{{ p.model_a }} {{ p['notable'] }} {{ p.missing is defined }} {{ p.items is defined }}"
    )
    rendered = make_environment(tmp_path).get_template("page.html").render(p=pair)
    assert rendered == "m1 False False True"


def test_a_macro_once_per_page_repeats_its_markup(tmp_path: Path) -> None:
    """`once_per_page` renders a macro once for the same objects and options, and again for
    others: the page reads exactly as with a call each time."""
    (tmp_path / "page.html").write_text(
        "{% macro card(a, css='x') %}[{{ a.name }}:{{ css }}:{{ tick() }}]{% endmacro %}"
        "{% set once = once_per_page(card) %}"
        "{% for a in items %}{{ once(a, css='p') }}{% endfor %}|{{ once(items[0]) }}"
    )
    calls: list[int] = []

    def tick() -> int:
        calls.append(1)
        return len(calls)

    class Item:
        def __init__(self, name: str) -> None:
            self.name = name

    first, second = Item("<a>"), Item("b")
    rendered = make_environment(tmp_path).get_template("page.html").render(
        items=[first, second, first, first], tick=tick
    )
    # rendered once per (object, options): first with css p, second, then first with css x
    assert rendered == "[&lt;a&gt;:p:1][b:p:2][&lt;a&gt;:p:1][&lt;a&gt;:p:1]|[&lt;a&gt;:x:3]"
    assert len(calls) == 3
    # a second page starts with nothing kept
    again = make_environment(tmp_path).get_template("page.html").render(
        items=[second], tick=tick
    )
    assert again == "[b:p:4]|[b:x:5]"


def folder_links_one_by_one(html: str) -> str:
    """file_links as it was: a call for every link, changing only the folder links."""

    def rewritten(m: re.Match[str]) -> str:
        return f'href="{m.group(1)}index.html{m.group(2) or ""}"' if m.group(1) else m.group(0)

    return FOLDER_LINK.sub(rewritten, html)


def test_file_links_as_one_by_one() -> None:
    pieces = ['href="', "#", "a", "/", "../", '"', "?", ":", "x/", "href=", ">", " ", "#p-a"]
    shuffled = random.Random(7)
    for _ in range(20_000):
        html = "".join(shuffled.choice(pieces) for _ in range(shuffled.randint(1, 14)))
        assert file_links(html) == folder_links_one_by_one(html), html
    tricky = '<a href="#xhref="x/">'  # an anchor ending in href=: the slow path, same text
    assert file_links(tricky) == folder_links_one_by_one(tricky) == tricky
    assert file_links('<a href="../t/#p">') == '<a href="../t/index.html#p">'
