"""Load YAML or JSON keeping the line of every node, so errors can point at the line a person must fix."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from konkord.errors import SuiteError

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Located:
    """A parsed document and, for each path into it, the 1-based line where that value starts."""

    data: Any
    lines: dict[Loc, int]

    def line_of(self, loc: Loc) -> int:
        """The line of the deepest known prefix of ``loc`` (a missing key points at its parent)."""
        for end in range(len(loc), -1, -1):
            if loc[:end] in self.lines:
                return self.lines[loc[:end]]
        return 1


def read_text(path: Path) -> str:
    """Read a text file, refusing binary and empty files with a message naming the file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise SuiteError(f"{path}: is a directory, expected a file") from None
    if b"\x00" in raw:
        raise SuiteError(f"{path}:1: this is a binary file, not text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SuiteError(f"{path}:{line}: not valid UTF-8 text") from None
    if not text.strip():
        raise SuiteError(f"{path}:1: the file is empty")
    return text


def _walk(node: yaml.Node, loc: Loc, lines: dict[Loc, int], path: Path) -> Any:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if not isinstance(key, str) or not isinstance(key_node, yaml.ScalarNode):
                raise SuiteError(f"{path}:{key_node.start_mark.line + 1}: a key must be plain text")
            if key in out:
                raise SuiteError(
                    f"{path}:{key_node.start_mark.line + 1}: {_dotted((*loc, key))} is given twice"
                )
            lines[(*loc, key)] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, (*loc, key), lines, path)
            lines[(*loc, key)] = value_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, (*loc, i), lines, path) for i, item in enumerate(node.value)]
    return yaml.safe_load(yaml.serialize(node))


def load_yaml(path: Path) -> Located:
    """Parse a YAML file into plain data plus line numbers; syntax errors name the line."""
    text = read_text(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = exc.problem or "invalid YAML"
        if "\t" in text.splitlines()[line - 1 if line - 1 < len(text.splitlines()) else -1]:
            problem = "a tab character is not allowed for indentation in YAML; use spaces"
        raise SuiteError(f"{path}:{line}: {problem}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}:1: invalid YAML ({exc})") from None
    if node is None:
        raise SuiteError(f"{path}:1: the file is empty")
    lines: dict[Loc, int] = {}
    return Located(_walk(node, (), lines, path), lines)


def load_json(path: Path) -> Located:
    """Parse a JSON file (JSON is YAML, so positions come from the same walk) with JSON's errors."""
    text = read_text(path)
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    return load_yaml(path)


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def describe_loc(loc: Loc) -> str:
    """``('tasks', 3, 'id')`` -> ``tasks[3].id``: how a person names a field."""
    return _dotted(loc)
