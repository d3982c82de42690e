"""Lists that also remember something derived from their items (columns, row indices) and
let go of it as soon as they are changed, so a stale summary is never read for new items."""

from __future__ import annotations

from typing import Any

# Every list method that changes the list in place.
CHANGING_METHODS = (
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
    "__setitem__", "__delitem__", "__iadd__", "__imul__",
)  # fmt: skip


def forget_when_changed(cls: type[list[Any]], attribute: str) -> None:
    """Make every changing method of the list subclass `cls` set `attribute` to None first."""
    for name in CHANGING_METHODS:
        setattr(cls, name, _forgetting(name, attribute))


def _forgetting(name: str, attribute: str) -> Any:
    method = getattr(list, name)

    def changed(self: list[Any], *args: Any, **kwargs: Any) -> Any:
        setattr(self, attribute, None)
        return method(self, *args, **kwargs)

    changed.__name__ = name
    return changed
