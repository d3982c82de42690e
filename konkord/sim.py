"""Offline simulated models (`sim/<name>`) and judges (`sim-judge/<name>`), as a litellm provider.

Registered with litellm as custom providers so that the real code path (litellm, the judge frame,
the verdict parser, the evidence log) runs with no network and no key. Everything is deterministic
from the model name, the messages and the seed.

The latent model (the one `konkord simulate` draws from, there without the text): a model has a
strength `s` (logits), each task a difficulty `d`, each (model, task) a task effect
`u ~ N(0, task_effect)`, and each answer a quality `q = s + u - d + e` with `e` a standard
logistic draw, so that answers compare as Bradley-Terry with task effects. The quality becomes
0 to 3 *visible defects* (one per logit below 1), which a reader (or the simulated judge) sees in
the text: plausible bugs in the reference solution of a code task, or policy breaks written into
the reference reply of a support task. Equal defects are a true tie, which `simulate` omits. The judge reads the defects and, when sure (probability
`accuracy`), prefers the answer with fewer; when unsure it says TIE (`tie_rate`), takes the
longer answer (`length_bias`), or takes the answer shown first (`position_bias`).

Parameters go in the name after a colon: `sim/atlas:strength=1.5,task_effect=0.3`,
`sim-judge/careful:accuracy=0.9,position_bias=0.7,tie_rate=0.1`. A bare `sim/atlas` takes a
strength drawn from its name; judge presets are listed in `JUDGE_PRESETS`.
"""

from __future__ import annotations

import ast
import difflib
import functools
import hashlib
import json
import math
import random
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from konkord.errors import KonkordError

MAX_DEFECTS = 3
SUITES_DIR = Path("suites")
RUNS_FILE = Path("runs.json")
RUNS_ROOT = Path("runs")

# ---------------------------------------------------------------------------------------------
# Names and parameters


@dataclass(frozen=True)
class SimModelParams:
    """A simulated model: its latent strength and how much it varies from task to task."""

    name: str
    strength: float
    task_effect: float = 0.5
    verbosity: float = 0.5  # probability of adding a (quality-neutral) explanation paragraph


@dataclass(frozen=True)
class SimJudgeParams:
    """A simulated judge: how often it reads a pair right, and what it does when unsure."""

    name: str
    accuracy: float = 0.85
    position_bias: float = 0.5  # when unsure: probability of taking the answer shown first
    length_bias: float = 0.0  # when unsure: probability of taking the longer answer
    tie_rate: float = 0.1  # when unsure: probability of answering TIE


JUDGE_PRESETS: dict[str, dict[str, float]] = {
    "fair": {},
    "careful": {"accuracy": 0.95, "tie_rate": 0.2},
    "sloppy": {"accuracy": 0.6},
    "first": {"accuracy": 0.0, "position_bias": 1.0, "tie_rate": 0.0},  # pure position bias
    "coin": {"accuracy": 0.0, "position_bias": 0.5, "tie_rate": 0.0},
    "verbose": {"accuracy": 0.7, "length_bias": 0.8},
}

_MODEL_KEYS = {f.name for f in fields(SimModelParams)} - {"name"}
_JUDGE_KEYS = {f.name for f in fields(SimJudgeParams)} - {"name"}
_UNIT_KEYS = {"accuracy", "position_bias", "length_bias", "tie_rate", "verbosity"}


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def split_sim_name(model: str) -> tuple[str, dict[str, float]]:
    """`sim/atlas:strength=1.5` -> ("atlas", {"strength": 1.5}); the provider prefix is optional."""
    bare = model.split("/", 1)[1] if model.startswith(("sim/", "sim-judge/")) else model
    base, _, spec = bare.partition(":")
    if not base:
        raise KonkordError(f'"{model}": a simulated model needs a name, e.g. sim/atlas')
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, eq, raw = item.partition("=")
        try:
            if not eq:
                raise ValueError
            values[key.strip()] = float(raw)
        except ValueError:
            raise KonkordError(
                f'"{model}": "{item}" is not key=number (write e.g. {base}:strength=1.2)'
            ) from None
    return base, values


def _checked(model: str, values: dict[str, float], allowed: set[str]) -> dict[str, float]:
    for key, value in values.items():
        if key not in allowed:
            raise KonkordError(
                f'"{model}": unknown parameter "{key}" (valid: {", ".join(sorted(allowed))})'
            )
        if key in _UNIT_KEYS and not 0.0 <= value <= 1.0:
            raise KonkordError(f'"{model}": {key}={value} must be between 0 and 1')
        if key == "task_effect" and value < 0:
            raise KonkordError(f'"{model}": task_effect={value} must not be negative')
    return values


def model_params(model: str) -> SimModelParams:
    """The parameters of `sim/<name>[:key=value,...]`; unset ones are derived from the name."""
    base, values = split_sim_name(model)
    _checked(model, values, _MODEL_KEYS)
    rng = _rng("sim-model-defaults", base)
    defaults = SimModelParams(
        name=base,
        strength=round(max(-2.5, min(2.5, rng.gauss(0.0, 1.0))), 3),
        verbosity=round(rng.uniform(0.2, 0.8), 3),
    )
    overrides: dict[str, Any] = dict(values)
    return replace(defaults, **overrides)


def judge_params(model: str) -> SimJudgeParams:
    """The parameters of `sim-judge/<name>[:key=value,...]`, starting from a preset if named."""
    base, values = split_sim_name(model)
    _checked(model, values, _JUDGE_KEYS)
    overrides: dict[str, Any] = {**JUDGE_PRESETS.get(base, {}), **values}
    return replace(SimJudgeParams(name=base), **overrides)


def validate_sim_name(model: str) -> None:
    """Raise a KonkordError naming the problem if a `sim/` or `sim-judge/` name is malformed."""
    if model.startswith("sim-judge/"):
        judge_params(model)
    elif model.startswith("sim/"):
        model_params(model)


# ---------------------------------------------------------------------------------------------
# The latent model


def task_difficulty(task_key: str) -> float:
    """A task's difficulty, drawn from its text (logits; 0 is an average task)."""
    return _rng("sim-task", task_key).gauss(0.0, 0.5)


def answer_quality(params: SimModelParams, task_key: str, seed: int | None) -> float:
    """The latent quality of one answer; common random numbers per model name, not per strength."""
    effect = _rng("sim-effect", params.name, task_key).gauss(0.0, 1.0) * params.task_effect
    uniform = _rng("sim-noise", params.name, task_key, seed).random()
    noise = math.log(uniform / (1.0 - uniform)) if 0.0 < uniform < 1.0 else 0.0
    return params.strength + effect - task_difficulty(task_key) + noise


def defects_for(quality: float) -> int:
    """Visible defects for a latent quality: none above 1, one more per logit below, at most 3.

    The tiers are centred on an average answer (a quarter of them flawless), so strengths
    above and below average both show in the text rather than all strong models writing the
    same flawless answer."""
    if quality > 1.0:
        return 0
    return min(MAX_DEFECTS, 1 + int(1.0 - quality))


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
_SCANNED: dict[str, tuple[tuple[str, float], ...]] = {}


def _prompt_key(prompt: str) -> str:
    return " ".join(prompt.split())


def register_reference(prompt: str, reference: str) -> None:
    """Make a task's reference known to the simulated models (the run stage or tests may call)."""
    _REGISTRY[_prompt_key(prompt)] = reference


def register_suite(suite: Any) -> None:
    """Register the reference of every task of a loaded `konkord.suite.Suite` that has one."""
    for task in suite.tasks:
        if task.reference:
            register_reference(task.prompt, task.reference)


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


def _scan_suites() -> None:
    """Register the references of every suite found (rescanned when a file changes)."""
    files = _suite_files()
    stamp = tuple((str(p.resolve()), p.stat().st_mtime) for p in files)
    key = str(Path.cwd())
    if _SCANNED.get(key) == stamp:
        return
    from konkord.suite import load_suite

    for path in files:
        try:
            register_suite(load_suite(path))
        except KonkordError:
            continue  # a broken suite is `konkord validate`'s business, not the simulator's
    _SCANNED[key] = stamp


def reference_for(prompt: str) -> str | None:
    """The reference of a known task with this prompt (found in the suites or registered)."""
    key = _prompt_key(prompt)
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
    language = "python" if reference and _code_of(reference) is not None else None
    return TaskView(prompt, context, reference, language)


# ---------------------------------------------------------------------------------------------
# Writing answers whose quality shows


_FENCE = re.compile(r"```[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


def _code_of(text: str) -> str | None:
    """The first fenced code block of a text, or the text itself if it parses as Python."""
    found = _FENCE.search(text)
    if found:
        return found.group(1).rstrip("\n")
    if not _parses(text):
        return None
    return text.strip("\n") if "\n" in text.strip() or "def " in text else None


@functools.lru_cache(maxsize=512)
def _bug_candidates(code: str) -> tuple[str, ...]:
    """Every single-bug copy of `code` (cached: planting bugs is the simulator's costly part)."""
    from konkord.mutate import plausible_bugs

    try:
        return tuple(plausible_bugs(code))
    except ValueError:
        return ()


Edit = tuple[int, int, list[str]]  # reference lines [i1, i2) replaced by these lines


def _edits(reference: list[str], mutant: str) -> list[Edit]:
    got = mutant.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=reference, b=got, autojunk=False)
    return [(i1, i2, got[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _bugged(code: str, defects: int, rng: random.Random) -> str:
    """`code` with `defects` plausible bugs in different places (fewer if it has no room).

    Single-bug copies are found once per reference and merged line by line where they touch
    different lines, so a model's third bug costs no more than its first."""
    if defects == 0:
        return code
    reference = code.splitlines(keepends=True)
    candidates = [_edits(reference, mutant) for mutant in _bug_candidates(code)]
    picked: list[Edit] = []
    used: set[int] = set()
    planted = 0
    start = int(rng.random() * 3)  # the first few candidates are the most typical bugs
    for offset in range(len(candidates)):
        edits = candidates[(start + offset) % len(candidates)]
        lines = {k for i1, i2, _ in edits for k in range(i1, max(i2, i1 + 1))}
        if not edits or lines & used:
            continue
        trial = sorted([*picked, *edits])
        if _parses(_applied(reference, trial)):
            picked, used, planted = trial, used | lines, planted + 1
        if planted >= defects:
            break
    return _applied(reference, picked)


def _applied(reference: list[str], edits: list[Edit]) -> str:
    out: list[str] = []
    position = 0
    for i1, i2, lines in sorted(edits, key=lambda e: (e[0], e[1])):
        out += reference[position:i1] + lines
        position = i2
    return "".join(out + reference[position:])


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _changed_regions(reference: str, code: str) -> int:
    """How many places `code` departs from `reference`: a changed line is one place, however
    many lines a deletion or insertion spans."""
    ref = [line.rstrip() for line in reference.splitlines() if line.strip()]
    got = [line.rstrip() for line in code.splitlines() if line.strip()]
    matcher = difflib.SequenceMatcher(a=ref, b=got, autojunk=False)
    places = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "replace":
            places += min(i2 - i1, j2 - j1) + (i2 - i1 != j2 - j1)
        elif tag != "equal":
            places += 1
    return places


_CODE_NOTES = (
    "The function keeps to the standard library and does not modify its inputs.",
    "I kept the structure close to how this is usually written, so it is easy to review.",
    "Names follow the task's wording, and the edge cases are handled inside the function.",
)


def _code_answer(view: TaskView, defects: int, verbose: bool, rng: random.Random) -> str:
    assert view.reference is not None
    reference = _code_of(view.reference) or view.reference
    code = _bugged(reference, defects, rng)
    text = f"```{view.language or 'python'}\n{code}\n```"
    if verbose:
        text = "Here is my solution.\n\n" + text + "\n\n" + rng.choice(_CODE_NOTES)
    return text


_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an and are as at be by can do for from has have i if in is it its my of on or our "
        "please that the their this to was we what when will with you your",
    )
)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

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


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


def relevant_fact(facts: list[str], prompt: str) -> str:
    """The policy fact sharing most words with the customer's message."""
    asked = _words(prompt)
    return max(facts, key=lambda fact: (len(_words(fact) & asked), -facts.index(fact)))


def _misstated(fact: str, known: set[str]) -> str | None:
    """The fact with its first number changed (to one the policy never states), as a careless
    agent would misquote it."""
    found = _NUMBER.search(fact)
    if found is None:
        return None
    value = float(found.group(0))
    for wrong in (value * 2, value * 3, value + 7, value + 11, value + 101):
        shown = f"{wrong:g}"
        if shown not in known:
            return fact[: found.start()] + shown + fact[found.end() :]
    return None


_EMPATHY = (
    "I know how frustrating it is when something doesn't go to plan, and I want to make sure "
    "this is sorted out properly for you."
)


def _reply_answer(view: TaskView, defects: int, verbose: bool) -> str:
    """The reference reply, with `defects` visible policy breaks written into it."""
    assert view.reference is not None
    paragraphs = [p.strip() for p in view.reference.strip().split("\n\n") if p.strip()]
    signoff = None
    if len(paragraphs) > 1 and len(paragraphs[-1].split()) <= 4:
        signoff = paragraphs.pop()
    changed = -1
    if defects >= 2:
        known = _known_numbers(view)
        for index, paragraph in enumerate(paragraphs[1:], start=1):
            if (misquoted := _misstated(paragraph, known)) is not None:
                paragraphs[index], changed = misquoted, index
                break
        else:
            paragraphs.append(EXCEPTION_PHRASES[1])
            changed = len(paragraphs) - 1
    if defects >= 3:
        if len(paragraphs) > 2 and changed != len(paragraphs) - 1:
            paragraphs[-1] = CURT_CLOSING
        else:
            paragraphs.append(CURT_CLOSING)
    if defects >= 1:
        paragraphs.append(EXCEPTION_PHRASES[0])
    if verbose:
        paragraphs.append(_EMPATHY)
    if signoff is not None:
        paragraphs.append(signoff)
    return "\n\n".join(paragraphs)


def _support_answer(view: TaskView, defects: int, verbose: bool, rng: random.Random) -> str:
    """No reference: a reply composed from the policy fact closest to the customer's message."""
    fact = relevant_fact(policy_facts(view.context), view.prompt).rstrip(".")
    fact_text = fact[0].lower() + fact[1:] if fact[:2] != fact[:2].upper() else fact
    statement = f"Our policy is that {fact_text}."
    misquote = _misstated(fact_text, _known_numbers(view))
    lines = ["Hi, thanks for getting in touch."]
    if defects >= 2:
        # the second defect: the policy misquoted, or (with no number to get wrong) waved away
        statement = f"Our policy is that {misquote}." if misquote else EXCEPTION_PHRASES[1]
    lines.append(statement)
    if defects >= 1:
        lines.append(EXCEPTION_PHRASES[0])
    if verbose:
        lines.append(_EMPATHY)
    if defects >= 3:
        lines.append(CURT_CLOSING)
    else:
        lines.append("Reply to this message with your order number and I'll take it from there.")
    lines.append("Best regards,\nSupport")
    return "\n\n".join(lines)


_GENERIC_FACTS = ((7, 8), (12, 12), (9, 6), (15, 4), (23, 3))


def _generic_answer(view: TaskView, defects: int, verbose: bool, rng: random.Random) -> str:
    """No reference and no policy: worked checks, `defects` of them visibly wrong."""
    picks = rng.sample(_GENERIC_FACTS, 3)
    wrong = set(rng.sample(range(3), min(3, defects)))
    lines = ["Here is how I would approach this, with the figures checked as I go:"]
    for index, (x, y) in enumerate(picks):
        product = x * y + (rng.choice((-2, -1, 1, 2)) if index in wrong else 0)
        lines.append(f"- Step {index + 1}: {x} x {y} = {product}.")
    if verbose:
        lines.append("I have laid the steps out one by one so each can be checked separately.")
    return "\n".join(lines)


def sim_answer(model: str, messages: list[dict[str, Any]], seed: int | None) -> str:
    """A simulated model's answer: its latent quality shown as visible defects in the text."""
    params = model_params(model)
    view = view_from_messages(messages)
    task_key = _prompt_key(view.prompt)
    defects = defects_for(answer_quality(params, task_key, seed))
    rng = _rng("sim-text", params.name, task_key, seed)
    verbose = rng.random() < params.verbosity
    if view.reference is not None and _code_of(view.reference) is not None:
        return _code_answer(view, defects, verbose, rng)
    if view.reference is not None:
        return _reply_answer(view, defects, verbose)
    if view.context and policy_facts(view.context):
        return _support_answer(view, defects, verbose, rng)
    return _generic_answer(view, defects, verbose, rng)


# ---------------------------------------------------------------------------------------------
# Reading answers: the simulated judge's (and labeller's) eye


@dataclass(frozen=True)
class Reading:
    """What a reader finds wrong with one answer: how many defects, and the first in words."""

    defects: int
    note: str


def read_answer(answer: str, view: TaskView) -> Reading:
    """Count the visible defects of an answer to a task, the way a careful reader would."""
    if view.reference is not None and (reference := _code_of(view.reference)) is not None:
        code = _code_of(answer)
        if code is None:
            return Reading(MAX_DEFECTS + 1, "gives no code")
        regions = _changed_regions(reference, code)
        if regions == 0:
            return Reading(0, "matches the reference behaviour")
        return Reading(regions, f"departs from the reference in {_first_change(reference, code)}")
    if view.reference is not None or (view.context and policy_facts(view.context)):
        return _read_support(answer, view)
    wrong = []
    for x, y, z in re.findall(r"(\d+) x (\d+) = (-?\d+)", answer):
        if int(x) * int(y) != int(z):
            wrong.append(f"{x} x {y} = {z}")
    if wrong:
        return Reading(len(wrong), f"gets {wrong[0]} wrong")
    return Reading(0, "has no visible mistakes")


def _first_change(reference: str, code: str) -> str:
    ref = [line.rstrip() for line in reference.splitlines() if line.strip()]
    got = [line.rstrip() for line in code.splitlines() if line.strip()]
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=ref, b=got, autojunk=False).get_opcodes():
        if tag in ("replace", "insert") and j1 < j2:
            return f"`{got[j1].strip()}`"
        if tag == "delete":
            return "leaving out a line of the reference"
    return "its code"


def _known_numbers(view: TaskView) -> set[str]:
    """Numbers a correct reply may quote: those of the policy, the ticket and the reference."""
    return set(_NUMBER.findall(f"{view.context} {view.prompt} {view.reference or ''}"))


def _read_support(answer: str, view: TaskView) -> Reading:
    known = _known_numbers(view)
    problems = [
        f"quotes {n}, which the policy does not say"
        for n in _NUMBER.findall(answer)
        if n not in known
    ]
    problems += ["promises an exception to the policy" for p in EXCEPTION_PHRASES if p in answer]
    if CURT_CLOSING in answer:
        problems.append("offers no next step")
    if not problems:
        return Reading(0, "states the policy correctly and offers a next step")
    return Reading(len(problems), problems[0])


def _judge_view(messages: list[dict[str, Any]]) -> tuple[TaskView, str, str] | None:
    from konkord.judge_frame import split_framed_answers

    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        text = str(message.get("content") or "")
        try:
            first, second = split_framed_answers(text)
        except ValueError:
            continue
        return view_from_judge_message(text), first, second
    return None


def sim_judge_answer(model: str, messages: list[dict[str, Any]], seed: int | None) -> str:
    """A simulated judge's response in the real format: a short rationale, then a verdict line."""
    params = judge_params(model)
    found = _judge_view(messages)
    if found is None:
        return "I could not find two framed answers to compare.\n\nVERDICT: TIE"
    view, first, second = found
    readings = (read_answer(first, view), read_answer(second, view))
    rng = _rng("sim-judge", params.name, messages[-1].get("content"), seed)
    verdict, rationale = judge_decision(params, readings, (len(first), len(second)), rng)
    return f"{rationale}\n\nVERDICT: {verdict}"


def judge_decision(
    params: SimJudgeParams,
    readings: tuple[Reading, Reading],
    lengths: tuple[int, int],
    rng: random.Random,
) -> tuple[str, str]:
    """("1" | "2" | "TIE", rationale): the truth when sure, else a tie, length or position."""
    one, two = readings
    if rng.random() < params.accuracy:
        if one.defects == two.defects:
            if one.defects == 0:
                return "TIE", "Both answers are correct and neither is clearly better."
            return "TIE", f"Both answers have problems: Answer 1 {one.note}; Answer 2 {two.note}."
        better, worse = ("1", two) if one.defects < two.defects else ("2", one)
        good = one if better == "1" else two
        other = "2" if better == "1" else "1"
        return better, f"Answer {better} {good.note}, while Answer {other} {worse.note}."
    unsure = "Both answers address the task and I cannot tell them apart with confidence."
    if rng.random() < params.tie_rate:
        return "TIE", unsure
    if rng.random() < params.length_bias and lengths[0] != lengths[1]:
        longer = "1" if lengths[0] > lengths[1] else "2"
        return longer, f"{unsure} Answer {longer} is more thorough."
    if rng.random() < params.position_bias:
        return "1", f"{unsure} On balance Answer 1 reads slightly better."
    return "2", f"{unsure} On balance Answer 2 reads slightly better."


# ---------------------------------------------------------------------------------------------
# The litellm provider


def _text_of(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def _make_response(litellm: Any, model: str, text: str, messages: list[dict[str, Any]]) -> Any:
    prompt_tokens = max(1, len(_text_of(messages)) // 4)
    completion_tokens = max(1, len(text) // 4)
    response = litellm.ModelResponse(
        model=model,
        choices=[
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
        usage={
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    )
    return response


def register(litellm: Any) -> None:
    """Register the `sim` and `sim-judge` providers with litellm (idempotent)."""
    from litellm.llms.custom_llm import CustomLLM

    class SimProvider(CustomLLM):  # type: ignore[misc]
        def __init__(self, provider: str, answer: Any) -> None:
            super().__init__()
            self._provider = provider
            self._answer = answer

        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            params = kwargs.get("optional_params") or {}
            try:
                text = self._answer(model, messages, params.get("seed"))
            except KonkordError as exc:
                # A malformed name is the caller's mistake: permanent, never retried.
                raise litellm.BadRequestError(
                    message=str(exc), model=model, llm_provider=self._provider
                ) from None
            return _make_response(litellm, model, text, messages)

        async def acompletion(
            self, model: str, messages: list[Any], *args: Any, **kwargs: Any
        ) -> Any:
            return self.completion(model, messages, *args, **kwargs)

    existing = [
        p
        for p in (litellm.custom_provider_map or [])
        if p.get("provider") not in {"sim", "sim-judge"}
    ]
    litellm.custom_provider_map = [
        *existing,
        {"provider": "sim", "custom_handler": SimProvider("sim", sim_answer)},
        {"provider": "sim-judge", "custom_handler": SimProvider("sim-judge", sim_judge_answer)},
    ]
    # litellm reads the map into its provider list when a call is made through it.
    from litellm.utils import custom_llm_setup

    custom_llm_setup()  # type: ignore[no-untyped-call]
