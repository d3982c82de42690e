"""Plain data: what may cross between the tests and the answer, and its JSON text.

Imported by wire.py on both sides (the harness outside the sandbox, the worker inside); it
uses the standard library only, and not the json package, whose imports cost every check.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing costs every check a few milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Classes (and typing forms) of these modules cross by name, so that `from typing import Any`
# or `from collections import OrderedDict` in the answer reaches the tests as the real thing.
STDLIB_BY_NAME = frozenset({
    "typing", "collections", "collections.abc", "dataclasses", "enum", "fractions",
    "decimal", "datetime", "abc",
})  # fmt: skip
SCALARS = (type(None), bool, int, float, str)
# Subclasses of builtin types cross as the builtin value, read with the base type's own methods
# (an int subclass with a rigged __int__ or __eq__ still crosses as its true int value).
BASE_VALUES: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (int, int.__int__), (float, float.__float__), (str, str.__str__),
    (tuple, lambda v: tuple(tuple.__iter__(v))), (list, lambda v: list(list.__iter__(v))),
    (dict, lambda v: dict(dict.items(v))), (frozenset, frozenset), (set, set),
)  # fmt: skip


def _constant(name: str) -> float:
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


class _Strict:
    """The decoding options the json module would pass to its C scanner."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)


def _no_default(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not plain data")


try:  # json's C core, without the json package: importing it (re, enum...) costs each check
    import _json

    _scan = _json.make_scanner(_Strict())  # type: ignore[arg-type]
    _encode = _json.make_encoder(None, _no_default, _json.encode_basestring_ascii, None, ":",
                                 ",", False, False, True)

    def _dumps(value: object) -> str:
        return "".join(_encode(value, 0))

    def _loads(text: str) -> object:
        try:
            value, end = _scan(text, 0)
        except StopIteration:
            raise ValueError("not JSON") from None
        if end != len(text):
            raise ValueError("extra data after the JSON value")
        return value

except ImportError:  # another Python: the json package does the same, a little slower
    import json

    def _dumps(value: object) -> str:
        return json.dumps(value, separators=(",", ":"))

    def _loads(text: str) -> object:
        return json.loads(text)


def _without_digit_limit(convert: Callable[[Any], Any], value: Any) -> Any:
    """`convert(value)` with Python's int-string limit (4,300 digits) lifted for this one
    conversion: a correct answer's factorial(2000) must cross, while the answer's and the
    tests' own code keep the limit. The message size limit still bounds every integer."""
    get_limit = getattr(sys, "get_int_max_str_digits", None)
    if get_limit is None:  # a Python without the limit
        return convert(value)
    limit = get_limit()
    sys.set_int_max_str_digits(0)
    try:
        return convert(value)
    finally:
        sys.set_int_max_str_digits(limit)


def dumps(value: object) -> str:
    """Compact JSON for plain data (dicts with text keys, lists, text, numbers of any size)."""
    return _without_digit_limit(_dumps, value)  # type: ignore[no-any-return]


def loads(text: str) -> object:
    """The value of one JSON document with nothing around it; ValueError otherwise."""
    return _without_digit_limit(_loads, text)


class ProtocolError(Exception):
    """A message that breaks the protocol: the other side is broken or hostile."""


def by_name(value: Any) -> list[str] | None:
    """(module, name) when `value` is a public class of a module in STDLIB_BY_NAME."""
    if not isinstance(value, type) and type(value).__module__ != "typing":
        return None
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None) or getattr(value, "_name", None)
    if module not in STDLIB_BY_NAME or not isinstance(name, str) or not name.isidentifier():
        return None
    found = sys.modules.get(module)
    return [module, name] if found is not None and getattr(found, name, None) is value else None


def sync(target: Any, state: Any) -> None:
    """Make a list, dict or set the tests passed hold what the answer left in its copy."""
    if type(target) is list and type(state) is list:
        if target != state:
            target[:] = state
    elif type(target) in (dict, set) and type(state) is type(target):
        if target != state:
            target.clear()
            target.update(state)
    else:
        raise ProtocolError("an argument state of the wrong type")
