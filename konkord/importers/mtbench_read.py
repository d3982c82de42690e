"""Read the MT-Bench human judgments in their published forms into votes and conversations.

The Hugging Face rows (JSONL, JSON or Parquet, with `conversation_a`/`conversation_b`) and the
labels-only JSONL (judge, model_a, model_b, question_id, turn, winner). Each vote is turned so
that model_a < model_b and remembers the file:line it came from, so errors can name it.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konkord.configuration.yamlpos import read_regular_file, text_of
from konkord.errors import KonkordError

JUDGE = "gpt4_pair"
WINNERS = ("model_a", "model_b", "tie", "tie (inconsistent)")
REQUIRED = ("judge", "model_a", "model_b", "question_id", "turn", "winner")


@dataclass(frozen=True)
class Vote:
    """One published vote, turned so that model_a < model_b (the winner turned with it)."""

    judge: str
    question_id: int
    turn: int
    model_a: str
    model_b: str
    winner: str  # model_a | model_b | tie | tie (inconsistent), relative to this orientation
    where: str

    @property
    def task_id(self) -> str:
        """The Konkord task of this vote: one (question, turn)."""
        return task_id(self.question_id, self.turn)

    @property
    def winner_model(self) -> str:
        """The winner in model terms: a model name or "tie" (any tie is a tie)."""
        if self.winner == "model_a":
            return self.model_a
        if self.winner == "model_b":
            return self.model_b
        return "tie"


@dataclass
class Dataset:
    """Everything read from the input files."""

    votes: list[Vote] = field(default_factory=list)
    # (question_id, model) -> [(role, content), ...], the first conversation seen
    conversations: dict[tuple[int, str], list[tuple[str, str]]] = field(default_factory=dict)
    files: list[dict[str, Any]] = field(default_factory=list)


def task_id(question_id: int, turn: int) -> str:
    """The task id of one MT-Bench question and turn."""
    return f"q{question_id}-t{turn}"


def _read_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Rows of one file with where each came from (file:line or file[row])."""
    # Under the suites' rules: a regular file of bounded size (/dev/zero, a FIFO: one line).
    raw = read_regular_file(path, "an imported file")
    if path.suffix == ".parquet":
        try:
            parquet = importlib.import_module("pyarrow.parquet")
        except ImportError:
            raise KonkordError(
                f"{path}: reading Parquet needs pyarrow (pip install pyarrow), "
                "or give the rows as JSONL"
            ) from None
        rows = parquet.read_table(io.BytesIO(raw)).to_pylist()
        return [(f"{path}[{k}]", dict(r)) for k, r in enumerate(rows)]
    text = text_of(path, raw)
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise KonkordError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if isinstance(data, dict) and isinstance(data.get("rows"), list):
            data = [r.get("row", r) if isinstance(r, dict) else r for r in data["rows"]]
        elif isinstance(data, dict):
            data = [row for split in data.values() if isinstance(split, list) for row in split]
        if not isinstance(data, list):
            raise KonkordError(f"{path}: expected a list of rows")
        return [(f"{path}[{k}]", r) for k, r in enumerate(data)]
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}:{number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise KonkordError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
    return out


def _turn_vote(where: str, row: dict[str, Any]) -> Vote:
    missing = [name for name in REQUIRED if name not in row]
    if missing:
        raise KonkordError(
            f"{where}: not an MT-Bench judgment row (missing {', '.join(missing)}; "
            f"expected fields {', '.join(REQUIRED)})"
        )
    winner = str(row["winner"])
    if winner not in WINNERS:
        raise KonkordError(f'{where}: winner "{winner}" is not one of {", ".join(WINNERS)}')
    model_a, model_b = str(row["model_a"]), str(row["model_b"])
    if model_a == model_b:
        raise KonkordError(f"{where}: model_a and model_b are both {model_a}")
    if model_a > model_b:
        model_a, model_b = model_b, model_a
        winner = {"model_a": "model_b", "model_b": "model_a"}.get(winner, winner)
    judge = row["judge"]
    if isinstance(judge, list):  # the original release names a judge as [model, prompt]
        judge = "gpt4_pair" if judge and "pair" in str(judge[-1]) else "-".join(map(str, judge))
    return Vote(
        str(judge), int(row["question_id"]), int(row["turn"]), model_a, model_b, winner, where
    )


def _messages(value: Any) -> list[tuple[str, str]] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return [(str(m.get("role")), str(m.get("content"))) for m in value]


def read_dataset(paths: Sequence[Path]) -> Dataset:
    """Read every input file; refuse a mix that would count the same votes twice."""
    data = Dataset()
    kinds_by_form: dict[bool, set[str]] = {True: set(), False: set()}
    for path in paths:
        rows = _read_rows(Path(path))
        with_text = False
        kinds: set[str] = set()
        for where, row in rows:
            if not isinstance(row, dict):
                raise KonkordError(f"{where}: expected a JSON object per row")
            vote = _turn_vote(where, row)
            data.votes.append(vote)
            kinds.add(vote_kind(vote.judge, where))
            for side in ("a", "b"):
                messages = _messages(row.get(f"conversation_{side}"))
                if messages is None:
                    continue
                with_text = True
                model = str(row[f"model_{side}"])
                data.conversations.setdefault((vote.question_id, model), messages)
        kinds_by_form[with_text] |= kinds
        raw = Path(path).read_bytes()
        data.files.append(
            {"path": str(path), "sha256": hashlib.sha256(raw).hexdigest(), "rows": len(rows)}
        )
    both = kinds_by_form[True] & kinds_by_form[False]
    if both:
        raise KonkordError(
            f"{', '.join(sorted(both))} votes come both from files with conversations and from "
            "labels-only files, which hold the same votes; give one form of each"
        )
    if not data.votes:
        raise KonkordError("no MT-Bench judgment rows in " + ", ".join(map(str, paths)))
    return data


def vote_kind(judge: str, where: str) -> str:
    if judge == JUDGE:
        return "gpt4"
    if judge.startswith("expert"):
        return "expert"
    if judge.startswith("author"):
        return "author"
    raise KonkordError(
        f'{where}: judge "{judge}" is none of gpt4_pair, expert_N or author_N; '
        "this importer knows only those"
    )
