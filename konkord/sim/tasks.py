"""What a task looks like to the simulated answerer and judge, and the text conventions both
share (fenced code, policy facts, the phrases that mark a policy break)."""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from konkord.errors import KonkordError

SUITES_DIR = Path("suites")
RUNS_FILE = Path("runs.json")
RUNS_ROOT = Path("runs")

# ---------------------------------------------------------------------------------------------
# What a task looks like to the simulated answerer and judge


@dataclass(frozen=True)
class TaskView:
    """What a simulated reader knows of a task: prompt, context, reference, answer language."""

    prompt: str
    context: str = ""
    reference: str | None = None
    language: str | None = None


_REGISTRY: dict[str, str] = {}
Stamp = tuple[tuple[str, int], ...]
# per working directory: the stamp of what was scanned, and the suite files named outside suites/
_SCANNED: dict[str, tuple[Stamp, tuple[str, ...]]] = {}


def prompt_key(prompt: str) -> str:
    return " ".join(prompt.split())


def register_reference(prompt: str, reference: str) -> None:
    """Make a task's reference known to the simulated models (the run stage or tests may call)."""
    _REGISTRY[prompt_key(prompt)] = reference


def register_suite(suite: Any) -> None:
    """Register the reference of every task of a loaded `konkord.configuration.suite.Suite`
    that has one, and of every turn of a conversation that has one."""
    for task in suite.tasks:
        for turn in task.conversation():
            if turn.reference:
                register_reference(turn.prompt, turn.reference)


def _suites_named_in(path: Path) -> list[str]:
    """The suite paths a runs.json (its runs) or a run manifest (its suite) names."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict):
        return []
    runs = data.get("runs")
    entries: list[Any] = runs if isinstance(runs, list) else [data]
    return [e["suite"] for e in entries if isinstance(e, dict) and isinstance(e.get("suite"), str)]


def _suite_files() -> list[Path]:
    """Suites a run here may use: suites/*.yaml, and those named by runs.json and manifests."""
    files = sorted(SUITES_DIR.glob("*.yaml")) + sorted(SUITES_DIR.glob("*.yml"))
    for source in [RUNS_FILE, *sorted(RUNS_ROOT.glob("*/run.json"))]:
        files += [Path(name) for name in _suites_named_in(source)]
    return [path for path in dict.fromkeys(files) if path.is_file()]


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _stamp(named: tuple[str, ...]) -> Stamp:
    """What decides which suites there are and what they hold, as (path, mtime): suites/'s
    entries, runs.json, every run's manifest and the suite files these named when last read.
    A few system calls, no parsing: a simulated call whose prompt has no reference asks it."""
    seen: list[tuple[str, int]] = [(str(RUNS_FILE), _mtime(str(RUNS_FILE)))]
    for folder, file_name in ((SUITES_DIR, None), (RUNS_ROOT, "run.json")):
        try:
            with os.scandir(folder) as entries:
                names = sorted(entry.name for entry in entries)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name, file_name) if file_name else os.path.join(folder, name)
            seen.append((path, _mtime(path)))
    seen += [(path, _mtime(path)) for path in named]
    return tuple(seen)


def _scan_suites() -> None:
    """Register the references of every suite found (read again when any of them, runs.json or
    a run manifest changes)."""
    key = os.getcwd()
    scanned = _SCANNED.get(key)
    if scanned is not None and _stamp(scanned[1]) == scanned[0]:
        return
    files = _suite_files()
    named = tuple(str(path) for path in files if path.parent != SUITES_DIR)
    stamp = _stamp(named)  # taken before reading: a change while reading is seen next time
    from konkord.configuration.suite import load_suite

    for path in files:
        try:
            register_suite(load_suite(path))
        except KonkordError:
            continue  # a broken suite is `konkord validate`'s business, not the simulator's
    _SCANNED[key] = (stamp, named)


def reference_for(prompt: str) -> str | None:
    """The reference of a known task with this prompt (found in the suites or registered)."""
    key = prompt_key(prompt)
    if key not in _REGISTRY:
        _scan_suites()
    return _REGISTRY.get(key)


_LANGUAGE_HINT = re.compile(r"Give your solution in a single fenced ```(\w[\w+-]*) code block\.")


def view_from_messages(messages: list[dict[str, Any]]) -> TaskView:
    """The task as the run stage sends it: system (context + language hint) and user prompt."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    prompt = users[-1] if users else ""
    hint = _LANGUAGE_HINT.search(system)
    context = _LANGUAGE_HINT.sub("", system).strip()
    return TaskView(prompt, context, reference_for(prompt), hint.group(1) if hint else None)


_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)


def view_from_judge_message(user_message: str) -> TaskView:
    """The task as the judge frame shows it: its Context, Task and Reference answer sections."""
    head = user_message.split("\n## Answer 1\n", 1)[0]
    sections: dict[str, str] = {}
    marks = list(_SECTION.finditer(head))
    for index, mark in enumerate(marks):
        stop = marks[index + 1].start() if index + 1 < len(marks) else len(head)
        sections[mark.group(1).strip().lower()] = head[mark.end() : stop].strip()
    prompt = sections.get("task", "")
    reference = sections.get("reference answer") or reference_for(prompt)
    context = sections.get("context given to both answerers", "")
    language = "python" if reference and code_of(reference) is not None else None
    return TaskView(prompt, context, reference, language)


_FENCE = re.compile(r"```[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


def code_of(text: str) -> str | None:
    """The first fenced code block of a text, or the text itself if it parses as Python."""
    found = _FENCE.search(text)
    if found:
        return found.group(1).rstrip("\n")
    if not parses_as_python(text):
        return None
    return text.strip("\n") if "\n" in text.strip() or "def " in text else None


def parses_as_python(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")
NUMBER = re.compile(r"\d+(?:\.\d+)?")

EXCEPTION_PHRASES = (
    "I'll make an exception to the policy for you this time.",
    "Don't worry about the usual rules; they won't apply in your case.",
)
CURT_CLOSING = "That's all I can do."


def policy_facts(context: str) -> list[str]:
    """The policy facts of a context: its bullet or numbered items, or else its sentences."""
    bullets: list[str] = []
    for line in context.splitlines():
        if found := _BULLET.match(line):
            bullets.append(found.group(1))
        elif bullets and line.startswith((" ", "\t")) and line.strip():
            bullets[-1] += " " + line.strip()  # an item continued on the next line
        elif bullets and not line.strip():
            continue
    if bullets:
        return bullets
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", context) if len(s.split()) >= 4]


def known_numbers(view: TaskView) -> set[str]:
    """Numbers a correct reply may quote: those of the policy, the ticket and the reference."""
    return set(NUMBER.findall(f"{view.context} {view.prompt} {view.reference or ''}"))
