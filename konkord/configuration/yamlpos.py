"""Load YAML or JSON keeping the line of every node, so errors point at the line to fix."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from konkord.errors import SuiteError

Loc = tuple[str | int, ...]

# libyaml when present (10x faster on large suites); both keep line marks on every node.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_FILE_MB = 100  # a 300,000-task suite is about 45 MB
MAX_ALIAS_VALUES = 100_000  # values that YAML aliases (*name) may add by repeating an anchor
MAX_DEPTH = 100  # levels of nesting; suites need four or five
STR_TAG = "tag:yaml.org,2002:str"
# A parsed value's Python type named as its writer knows it, for "should be X, not Y".
KIND_WORDS = {
    "str": "text",
    "int": "a whole number",
    "float": "a number",
    "bool": "true/false",
    "list": "a list",
    "dict": "a mapping",
    "NoneType": "null",
}


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


def read_regular_file(path: Path, what: str = "a suite or runs file") -> bytes:
    """The bytes of a regular file of at most MAX_FILE_MB, or a one-line SuiteError naming it:
    a FIFO, a device (/dev/zero), a folder or a symlink loop is refused before any read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        if os.path.islink(path):
            raise SuiteError(
                f"{path}: is a symlink to {os.readlink(path)}, which does not exist"
            ) from None
        raise SuiteError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise SuiteError(f"{path}: is a directory, expected a file") from None
    except PermissionError:
        raise SuiteError(f"{path}: cannot be read (permission denied)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SuiteError(f"{path}: is a symlink loop, not a file") from None
        raise SuiteError(f"{path}: cannot be opened ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SuiteError(f"{path}: is a directory, expected a file")
        raise SuiteError(f"{path}: {_file_kind(info.st_mode)}, expected a regular file")
    with os.fdopen(fd, "rb") as handle:
        limit = MAX_FILE_MB * 1024 * 1024
        too_big = f"{path}: is larger than {MAX_FILE_MB} MB, the limit for {what}"
        if info.st_size > limit:
            raise SuiteError(too_big)
        os.set_blocking(fd, True)
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:  # /proc/self/mem is "regular" and fails on read (EIO)
            raise SuiteError(f"{path}: cannot be read ({exc.strerror})") from None
        if len(raw) > limit:
            raise SuiteError(too_big)
    return raw


def read_text(path: Path, what: str = "a suite or runs file") -> str:
    """Read a text file, refusing what is not a regular file, too large, binary or empty.

    Opened without blocking and checked before reading, so a FIFO, a device such as /dev/zero,
    a directory or a symlink loop gives a one-line error instead of a hang or a traceback."""
    return text_of(path, read_regular_file(path, what))


def text_of(path: Path, raw: bytes) -> str:
    """The text of a file's bytes, refusing binary, non-UTF-8 or empty content (path:line)."""
    if b"\x00" in raw:
        raise SuiteError(f"{path}:1: this is a binary file, not text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SuiteError(f"{path}:{line}: not valid UTF-8 text (is this a binary file?)") from None
    if not text.strip():
        raise SuiteError(f"{path}:1: the file is empty")
    return text.removeprefix("\ufeff")


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    return "is not a regular file"


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large node tree is built and validated.

    A 300,000-task suite makes millions of nodes; each collection walks all of them, which
    made composing it quadratic (14 s instead of 1.6 s). Nothing built here is garbage."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Walker:
    """Turns a composed YAML node tree into plain data, noting the line of every value."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: dict[Loc, int] = {}
        self.constructor = yaml.constructor.SafeConstructor()
        self.seen: set[int] = set()  # nodes walked once: walking one again expands an alias
        self.open: set[int] = set()  # collections being walked: meeting one is a cycle
        self.in_alias = 0
        self.expanded = 0
        self.alias_at: tuple[int, Loc] = (1, ())  # the outermost alias being expanded

    def walk(self, node: yaml.Node, loc: Loc, key_line: int | None = None) -> Any:
        """Plain data for `node`; `key_line` is the line of its key, where an alias is used
        (a node's own mark is where its anchor is)."""
        line = node.start_mark.line + 1
        self.lines[loc] = line
        if isinstance(node, yaml.ScalarNode) and node.tag == STR_TAG and not self.in_alias:
            return node.value  # the common case, without the constructor's overhead
        key = id(node)
        repeat = key in self.seen
        if repeat or self.in_alias:
            if not self.in_alias:
                self.alias_at = (key_line or self.lines.get(loc[:-1], line), loc)
            self.expanded += 1
            if self.expanded > MAX_ALIAS_VALUES:
                at, where = self.alias_at
                raise SuiteError(
                    f"{self.path}:{at}: {_dotted(where)} YAML aliases (*name) expand to more "
                    f"than {MAX_ALIAS_VALUES:,} values (an alias bomb?); write the values out"
                )
        if key in self.open:
            raise SuiteError(
                f"{self.path}:{key_line or line}: {_dotted(loc)} is a YAML alias of itself"
            )
        if len(loc) > MAX_DEPTH:
            raise SuiteError(f"{self.path}:{line}: values are nested more than {MAX_DEPTH} deep")
        self.seen.add(key)
        self.in_alias += repeat
        self.open.add(key)
        try:
            return self._value(node, loc)
        finally:
            self.open.discard(key)
            self.in_alias -= repeat

    def _value(self, node: yaml.Node, loc: Loc) -> Any:
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                    raise SuiteError(
                        f"{self.path}:{key_line}: {_dotted(loc)} has a key that is not plain text"
                    )
                key = str(key_node.value)
                if key in out:
                    raise SuiteError(
                        f"{self.path}:{key_line}: {_dotted((*loc, key))} is given twice"
                    )
                out[key] = self.walk(value_node, (*loc, key), key_line)
                if isinstance(value_node, yaml.ScalarNode):
                    # a block scalar starts on its indicator line, which is the key's line
                    self.lines[(*loc, key)] = min(key_line, self.lines[(*loc, key)])
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.walk(item, (*loc, i)) for i, item in enumerate(node.value)]
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            raise SuiteError(
                f"{self.path}:{node.start_mark.line + 1}: {_dotted(loc)} {exc.problem}"
            ) from None


def load_yaml(path: Path) -> Located:
    """Parse a YAML file into plain data plus line numbers; syntax errors name the line."""
    text = read_text(path)
    try:
        with no_gc():
            node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = f"YAML syntax: {exc.problem or 'invalid YAML'}"
        tab_line = _first_tab_indent(text.splitlines(), upto=line)
        if tab_line is not None:
            raise SuiteError(
                f"{path}:{tab_line}: a tab is used for indentation; YAML allows only spaces"
            ) from None
        if exc.context and exc.context_mark and exc.context_mark.line + 1 < line:
            # e.g. an unclosed quote: point at where it opened, not at the end of the file
            problem = f"YAML syntax: {exc.context}, {exc.problem} (at line {line})"
            line = exc.context_mark.line + 1
        raise SuiteError(f"{path}:{line}: {problem}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}:1: invalid YAML ({exc})") from None
    if node is None:
        raise SuiteError(f"{path}:1: the file is empty")
    walker = _Walker(path)
    with no_gc():
        return Located(walker.walk(node, ()), walker.lines)


def _first_tab_indent(lines: list[str], upto: int) -> int | None:
    """The first line (1-based, at most `upto`) indented with a tab: the usual cause of errors."""
    for number, line in enumerate(lines[:upto], start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            return number
    return None


def load_json(path: Path) -> Located:
    """Parse a JSON file (JSON is YAML, so positions come from the same walk) with JSON's errors."""
    text = read_text(path)
    try:
        with no_gc():
            data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise SuiteError(f"{path}:1: values are nested too deeply") from None
    # The values come from json (YAML 1.1 would read 1e5 as text); only the lines from YAML.
    # Raw tabs can only be whitespace in valid JSON, and YAML refuses some of those: blank them.
    try:
        with no_gc():
            node = yaml.compose(text.replace("\t", " "), Loader=_Loader)
    except yaml.YAMLError:
        node = None
    if node is None:
        return Located(data, {})
    walker = _Walker(path)
    with no_gc():
        walker.walk(node, ())
    return Located(data, walker.lines)


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def describe_loc(loc: Loc) -> str:
    """``('tasks', 3, 'id')`` -> ``tasks[3].id``: how a person names a field."""
    return _dotted(loc)
