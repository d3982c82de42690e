"""Plausible bugs: one small, realistic mistake planted in working Python code.

The simulated models answer a code task with either the reference solution or a copy of it
carrying one bug of the kind people really write (a boundary comparison off by one, a range or
slice that stops one short, a forgotten edge-case branch, `and` for `or`), so that a reader,
a judge and the task's tests all have something real to find. The bug is spliced into the
original text, so comments and layout survive and the answer still looks hand-written.
"""

from __future__ import annotations

import ast
import copy
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["plausible_bug", "plausible_bugs"]

Path = tuple[tuple[str, int | None], ...]
Point = tuple[int, int]  # (line, column in characters), both 0-based
Edit = tuple[Point, Point, str]  # replace the text from start to end by this

# Comparison operators swapped for their boundary twin: the classic off-by-one.
_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
# Membership and identity tests turned around: `is None` for `is not None`, `in` for `not in`.
_NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
# How each operator is spelled, as a pattern to find it between its operands and its text.
_SYMBOL: dict[type[ast.AST], tuple[str, str]] = {
    ast.Lt: ("<", "<"),
    ast.LtE: ("<=", "<="),
    ast.Gt: (">", ">"),
    ast.GtE: (">=", ">="),
    ast.Eq: ("==", "=="),
    ast.NotEq: ("!=", "!="),
    ast.Is: (r"\bis\b", "is"),
    ast.IsNot: (r"\bis\s+not\b", "is not"),
    ast.In: (r"\bin\b", "in"),
    ast.NotIn: (r"\bnot\s+in\b", "not in"),
    ast.And: (r"\band\b", "and"),
    ast.Or: (r"\bor\b", "or"),
    ast.Add: (r"\+", "+"),
    ast.Sub: ("-", "-"),
}

# Lower sorts first: seed 0 takes the most typical bug, later seeds walk through the rest.
_COMPARE, _BOUND, _GUARD, _BOOLOP, _NEGATE, _RETURN, _CONSTANT, _ARITH = range(8)


@dataclass(frozen=True)
class _Site:
    """One candidate bug: where it goes in the tree and in the text, and what replaces it."""

    rank: int
    path: Path
    new: ast.AST | None  # None deletes the statement at `path`
    # Ways to write the change, tried in order: touching only the operator keeps the author's
    # spelling; re-rendering the whole node with ast.unparse is the fallback.
    alternatives: tuple[tuple[Edit, ...], ...]


def plausible_bugs(code: str) -> list[str]:
    """Every distinct single-bug copy of `code`, most typical first.

    Each copy parses, differs from `code` in exactly one place, and keeps the rest of the text
    (comments included) as it was. An empty list means there was nowhere plausible to put a bug.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"cannot plant a bug in code that does not parse: {exc}") from None
    # Split only where Python itself ends a line, so ast's line numbers index this list.
    lines = io.StringIO(code, newline="").readlines()
    sites = sorted(_sites(tree, lines), key=lambda site: site.rank)
    original = ast.dump(tree)
    seen: set[str] = {code}
    out: list[str] = []
    for site in sites:
        mutant = _apply(tree, lines, site)
        if mutant is None or mutant in seen:
            continue
        try:
            if ast.dump(ast.parse(mutant)) == original:
                continue
        except SyntaxError:
            continue
        seen.add(mutant)
        out.append(mutant)
    return out


def plausible_bug(code: str, seed: int = 0) -> str:
    """A copy of `code` with one plausible bug; the same seed always plants the same bug.

    Seed 0 gives the most typical bug (usually a boundary comparison); other seeds cycle
    through the other candidates. Raises ValueError when the code has no place for a bug.
    """
    candidates = plausible_bugs(code)
    if not candidates:
        raise ValueError("no plausible place for a bug in this code")
    return candidates[seed % len(candidates)]


def _annotation_ids(tree: ast.AST) -> set[int]:
    """Ids of every node inside a type annotation: a bug there would change nothing at run time."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        roots: list[ast.AST | None] = []
        if isinstance(node, ast.arg | ast.AnnAssign):
            roots.append(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            roots.append(node.returns)
        for root in roots:
            if root is not None:
                ids.update(id(sub) for sub in ast.walk(root))
    return ids


def _walk(node: ast.AST, path: Path) -> Iterator[tuple[ast.AST, Path]]:
    """Every node with its path of (field, index) steps from the root, in source order."""
    yield node, path
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield from _walk(item, (*path, (field, index)))
        elif isinstance(value, ast.AST):
            yield from _walk(value, (*path, (field, None)))


def _shifted(bound: ast.expr, down: bool) -> ast.expr:
    """A bound moved by one as people get it wrong: `n + 1` loses its `+ 1`, `n` gains `- 1`."""
    if (
        isinstance(bound, ast.BinOp)
        and isinstance(bound.right, ast.Constant)
        and bound.right.value == 1
        and isinstance(bound.op, ast.Add | ast.Sub)
    ):
        return copy.deepcopy(bound.left)
    if isinstance(bound, ast.Constant) and type(bound.value) is int:
        return ast.Constant(value=bound.value - 1 if down else bound.value + 1)
    op: ast.operator = ast.Sub() if down else ast.Add()
    return ast.BinOp(left=copy.deepcopy(bound), op=op, right=ast.Constant(value=1))


def _is_guard(stmt: ast.stmt) -> bool:
    """An early exit for an edge case: `if <cond>: return/raise/continue/break`, no else."""
    return (
        isinstance(stmt, ast.If)
        and not stmt.orelse
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], ast.Return | ast.Raise | ast.Continue | ast.Break)
    )


def _sites(tree: ast.AST, lines: list[str]) -> Iterator[_Site]:
    skip = _annotation_ids(tree)
    for node, path in _walk(tree, ()):
        if id(node) in skip:
            continue
        yield from _expression_sites(node, path, lines)
        for field, value in ast.iter_fields(node):
            if field in ("body", "orelse", "finalbody") and isinstance(value, list):
                yield from _guard_sites(value, (*path,), field, lines)


def _span(node: ast.AST, lines: list[str]) -> tuple[Point, Point] | None:
    """The node's text span as 0-based (line, character) pairs; ast gives UTF-8 byte offsets."""
    lineno = getattr(node, "lineno", None)
    end_lineno = getattr(node, "end_lineno", None)
    col = getattr(node, "col_offset", None)
    end_col = getattr(node, "end_col_offset", None)
    if lineno is None or end_lineno is None or col is None or end_col is None:
        return None

    def chars(line: int, byte_col: int) -> int:
        return len(lines[line].encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    return (lineno - 1, chars(lineno - 1, col)), (end_lineno - 1, chars(end_lineno - 1, end_col))


def _operator_edits(
    operands: list[ast.expr], old: list[ast.AST], new: list[ast.AST], lines: list[str]
) -> tuple[Edit, ...]:
    """Edits that rewrite only the operator between each pair of operands, or () if unsure."""
    edits: list[Edit] = []
    for (left, right), old_op, new_op in zip(pairwise(operands), old, new, strict=True):
        if type(old_op) is type(new_op):
            continue
        left_span, right_span = _span(left, lines), _span(right, lines)
        if left_span is None or right_span is None:
            return ()
        start, end = left_span[1], right_span[0]
        gap = _text(lines, start, end)
        pattern = _SYMBOL[type(old_op)][0]
        replaced, count = re.subn(pattern, _SYMBOL[type(new_op)][1], gap, count=1)
        if not count:
            return ()
        edits.append((start, end, replaced))
    return tuple(edits)


def _replace(
    rank: int,
    path: Path,
    old: ast.AST,
    new: ast.expr,
    lines: list[str],
    operator_edits: tuple[Edit, ...] = (),
) -> list[_Site]:
    span = _span(old, lines)
    if span is None:
        return []
    text = ast.unparse(new)
    whole = ((span[0], span[1], text),), ((span[0], span[1], f"({text})"),)
    alternatives = ((operator_edits,) if operator_edits else ()) + whole
    return [_Site(rank, path, new, alternatives)]


def _expression_sites(node: ast.AST, path: Path, lines: list[str]) -> Iterator[_Site]:
    if isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            for table, rank in ((_BOUNDARY, _COMPARE), (_NEGATED, _NEGATE)):
                twin = table.get(type(op))
                if twin is not None:
                    new = copy.deepcopy(node)
                    new.ops[index] = twin()
                    operands = [node.left, *node.comparators]
                    edits = _operator_edits(operands, list(node.ops), list(new.ops), lines)
                    yield from _replace(rank, path, node, new, lines, edits)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        span, operand_span = _span(node, lines), _span(node.operand, lines)
        dropped: tuple[Edit, ...] = ()
        if span is not None and operand_span is not None:
            dropped = ((span[0], operand_span[0], ""),)  # a forgotten `not`
        yield from _replace(_NEGATE, path, node, copy.deepcopy(node.operand), lines, dropped)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and 1 <= len(node.args) <= 3
        and not node.keywords
    ):
        stop_index = 0 if len(node.args) == 1 else 1
        stop = node.args[stop_index]
        yield from _replace(
            _BOUND, (*path, ("args", stop_index)), stop, _shifted(stop, down=True), lines
        )
        if len(node.args) >= 2:
            start = node.args[0]
            yield from _replace(_BOUND, (*path, ("args", 0)), start, _shifted(start, True), lines)
    elif isinstance(node, ast.Slice):
        for field in ("lower", "upper"):
            bound = getattr(node, field)
            if bound is not None:
                moved = _shifted(bound, down=field == "upper")
                yield from _replace(_BOUND, (*path, (field, None)), bound, moved, lines)
    elif isinstance(node, ast.BoolOp):
        new_bool = copy.deepcopy(node)
        new_bool.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        count = len(node.values) - 1
        edits = _operator_edits(node.values, [node.op] * count, [new_bool.op] * count, lines)
        yield from _replace(_BOOLOP, path, node, new_bool, lines, edits)
    elif (
        isinstance(node, ast.Return)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, bool)
    ):
        flipped = ast.Constant(value=not node.value.value)
        yield from _replace(_RETURN, (*path, ("value", None)), node.value, flipped, lines)
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 100:
        new_const = ast.Constant(value=1 if node.value == 0 else node.value - 1)
        yield from _replace(_CONSTANT, path, node, new_const, lines)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        new_arith = copy.deepcopy(node)
        new_arith.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        edits = _operator_edits([node.left, node.right], [node.op], [new_arith.op], lines)
        yield from _replace(_ARITH, path, node, new_arith, lines, edits)


def _guard_sites(body: list[ast.stmt], path: Path, field: str, lines: list[str]) -> Iterator[_Site]:
    """Dropping an edge-case guard, together with the comment lines that introduce it."""
    if len(body) < 2:
        return
    for index, stmt in enumerate(body):
        if not _is_guard(stmt):
            continue
        span = _span(stmt, lines)
        if span is None:
            continue
        (first, col), (last, end_col) = span
        if lines[first][:col].strip() or lines[last][end_col:].strip():
            continue  # shares its line with other code; leave it
        indent = lines[first][:col]
        while first > 0 and lines[first - 1].startswith(indent + "#"):
            first -= 1
        yield _Site(_GUARD, (*path, (field, index)), None, ((((first, 0), (last + 1, 0), ""),),))


def _apply(tree: ast.AST, lines: list[str], site: _Site) -> str | None:
    """Splice the site's text into the source; None when the result is not the intended tree."""
    expected = _expected_tree(tree, site)
    source = "".join(lines)
    for edits in site.alternatives:
        mutant = source
        for start, end, text in sorted(edits, reverse=True):
            mutant = mutant[: _offset(lines, start)] + text + mutant[_offset(lines, end) :]
        try:
            if ast.dump(ast.parse(mutant)) == expected:
                return mutant
        except SyntaxError:
            pass
    return None


def _offset(lines: list[str], point: Point) -> int:
    """The character offset in the whole source of a (line, column) point."""
    line, column = point
    return sum(len(text) for text in lines[:line]) + column


def _text(lines: list[str], start: Point, end: Point) -> str:
    """The source text between two points."""
    return "".join(lines)[_offset(lines, start) : _offset(lines, end)]


def _expected_tree(tree: ast.AST, site: _Site) -> str:
    """The dump the spliced text must parse to: the tree with only this site changed."""
    mutated = copy.deepcopy(tree)
    parent: ast.AST = mutated
    for field, index in site.path[:-1]:
        child = getattr(parent, field)
        parent = child[index] if index is not None else child
    field, index = site.path[-1]
    if site.new is None:
        assert index is not None
        del getattr(parent, field)[index]
    elif index is None:
        setattr(parent, field, site.new)
    else:
        getattr(parent, field)[index] = site.new
    return ast.dump(mutated)
