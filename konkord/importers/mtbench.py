"""Import the MT-Bench human judgments (Zheng et al. 2023) into a Konkord run.

Reads the dataset in its published forms: the Hugging Face rows (JSONL, JSON or Parquet, with
`conversation_a`/`conversation_b`), and the labels-only JSONL (judge, model_a, model_b,
question_id, turn, winner). A task is one (question, turn), id `q81-t1`. Expert votes become
labels with the expert id as labeller; an expert's second vote on the same item is labeller
`expert_3#2` (the evidence key holds one label per labeller and item, and no vote may be lost).
Author votes are kept apart in runs/<run>/import/author_votes.jsonl unless asked for, as the
published comparison leaves them out. GPT-4 pair votes become the combined verdicts of judge
`gpt4_pair`, written as two order records that `konkord.verdicts.combine_verdicts` combines back.
With conversations, the answers are imported too, so `konkord judge` can judge the same pairs.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from konkord.errors import KonkordError
from konkord.evidence import EvidenceLog, Record, now_iso
from konkord.llm import CallSettings
from konkord.runs_config import DEFAULT_RUNS_FILE, load_runs
from konkord.runspec import RunSpec, resolve_run, write_manifest
from konkord.stages.run import answer_key_hash, answer_messages
from konkord.suite import Suite, Task
from konkord.verdicts import answer_sha

JUDGE = "gpt4_pair"
FRAME_HASH = "mt-bench-gpt4-pair"
DEFAULT_RUN = "mt-bench-human"
WINNERS = ("model_a", "model_b", "tie", "tie (inconsistent)")
REQUIRED = ("judge", "model_a", "model_b", "question_id", "turn", "winner")
RUBRIC = (
    "Choose the answer that follows the user's instructions and answers the user's question "
    "better. Consider helpfulness, relevance, accuracy, depth, creativity and level of detail. "
    "Do not let the order of the answers, their length or the assistants' names influence you."
)
SOURCE = "lmsys/mt_bench_human_judgments (Zheng et al. 2023, CC BY 4.0)"


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


@dataclass(frozen=True)
class ImportSummary:
    """What an import wrote, for the closing lines."""

    run: str
    suite_path: Path
    tasks: int
    models: tuple[str, ...]
    labels: int
    labellers: int
    verdict_pairs: int
    answers: int
    author_votes: int
    authors_included: bool

    def lines(self) -> list[str]:
        """A short account for the terminal."""
        authors = (
            f"{self.author_votes} author votes included as labels"
            if self.authors_included
            else f"{self.author_votes} author votes kept apart in runs/{self.run}/import/"
            "author_votes.jsonl (left out, as in the published table)"
        )
        return [
            f'imported into run "{self.run}": {self.tasks} tasks (question x turn), '
            f"{len(self.models)} models, suite {self.suite_path}",
            f"  {self.labels} expert labels by {self.labellers} labellers; {authors}",
            f"  {self.verdict_pairs} GPT-4 pair verdicts as judge {JUDGE}",
            f"  {self.answers} answers"
            + ("" if self.answers else " (labels-only input: no conversations to import)"),
            f"next: konkord report --run {self.run} && konkord calibrate --run {self.run}",
        ]


def task_id(question_id: int, turn: int) -> str:
    """The task id of one MT-Bench question and turn."""
    return f"q{question_id}-t{turn}"


def _read_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Rows of one file with where each came from (file:line or file[row])."""
    if not path.exists():
        raise KonkordError(f"{path}: file not found")
    if path.suffix == ".parquet":
        try:
            parquet = importlib.import_module("pyarrow.parquet")
        except ImportError:
            raise KonkordError(
                f"{path}: reading Parquet needs pyarrow (pip install pyarrow), "
                "or give the rows as JSONL"
            ) from None
        rows = parquet.read_table(path).to_pylist()
        return [(f"{path}[{k}]", dict(r)) for k, r in enumerate(rows)]
    text = path.read_text(encoding="utf-8")
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
            kinds.add(_kind(vote.judge, where))
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


def _kind(judge: str, where: str) -> str:
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


def _prompt(question_id: int, turn: int, data: Dataset, models: Iterable[str]) -> str:
    for model in models:
        conversation = data.conversations.get((question_id, model))
        if conversation is None:
            continue
        users = [content for role, content in conversation if role == "user"]
        if turn == 1 and users:
            return users[0]
        if turn == 2 and len(users) >= 2:
            return (
                "This is the second turn of a conversation. The user first wrote:\n\n"
                f"{users[0]}\n\nand, after the assistant's reply, wrote:\n\n{users[1]}\n\n"
                "Each answer shows that assistant's own first reply for context; judge the "
                "reply to the second message."
            )
    return (
        f"MT-Bench question {question_id}, turn {turn}. (The question text is not in the "
        "labels-only file; import the Hugging Face rows with conversations to judge it anew.)"
    )


def _answer_text(conversation: list[tuple[str, str]], turn: int) -> str | None:
    replies = [content for role, content in conversation if role == "assistant"]
    if turn == 1 and replies:
        return replies[0]
    if turn == 2 and len(replies) >= 2:
        return f"First reply (context):\n\n{replies[0]}\n\nReply to the second message:\n\n{replies[1]}"
    return None


def _order_records(
    vote: Vote, shas: dict[tuple[str, str], str], created: str, first_shown_won: bool = True
) -> list[Record]:
    """The two order records whose combination is the published combined verdict.

    A "tie (inconsistent)" vote means the two orders disagreed, but which way each went was not
    published. It is written as the same position winning in both orders (the first shown, or
    with `first_shown_won` False the second; the importer alternates so that the positional
    split is not invented), marked `reconstructed`, and combines back to a flipped tie."""
    if vote.winner == "tie (inconsistent)":
        same = "1" if first_shown_won else "2"
        positions = {"ab": same, "ba": same}
    elif vote.winner == "tie":
        positions = {"ab": "tie", "ba": "tie"}
    elif vote.winner == "model_a":
        positions = {"ab": "1", "ba": "2"}
    else:
        positions = {"ab": "2", "ba": "1"}
    records = []
    for order, position in positions.items():
        first, second = (
            (vote.model_a, vote.model_b) if order == "ab" else (vote.model_b, vote.model_a)
        )
        winner = {"1": first, "2": second, "tie": "tie"}[position]
        records.append(
            {
                "kind": "verdict",
                "task_id": vote.task_id,
                "model_a": vote.model_a,
                "model_b": vote.model_b,
                "order": order,
                "judge": JUDGE,
                "frame_hash": FRAME_HASH,
                "position_winner": position,
                "winner": winner,
                "rationale": (
                    f'Imported GPT-4 pair verdict "{vote.winner}" from {SOURCE}; '
                    "the judge's own text was not published."
                    + (
                        " The two orders disagreed; which way each went was not published, "
                        "so this order's verdict is a placeholder."
                        if vote.winner == "tie (inconsistent)"
                        else ""
                    )
                ),
                "raw": vote.winner,
                "reconstructed": vote.winner == "tie (inconsistent)",
                "answer_a_sha": shas.get((vote.task_id, vote.model_a)),
                "answer_b_sha": shas.get((vote.task_id, vote.model_b)),
                "message_sha": None,
                "retried": False,
                "first_raw": None,
                "finish_reason": None,
                "cost_usd": None,
                "tokens_in": None,
                "tokens_out": None,
                "latency_s": None,
                "source": "import",
                "created_at": created,
            }
        )
    return records


def _label_records(votes: list[Vote], created: str) -> list[Record]:
    """One label per vote; a person's repeated vote on an item gets `#2`, `#3`... so none is lost."""
    seen: dict[tuple[str, str, str, str], int] = {}
    records = []
    for vote in votes:
        key = (vote.task_id, vote.model_a, vote.model_b, vote.judge)
        seen[key] = seen.get(key, 0) + 1
        labeller = vote.judge if seen[key] == 1 else f"{vote.judge}#{seen[key]}"
        records.append(
            {
                "kind": "label",
                "task_id": vote.task_id,
                "model_a": vote.model_a,
                "model_b": vote.model_b,
                "labeller": labeller,
                "winner": vote.winner_model,
                "shown_first": None,
                "source": "import",
                "created_at": created,
            }
        )
    return records


def import_mtbench(
    paths: Sequence[Path], run: str = DEFAULT_RUN, with_authors: bool = False
) -> ImportSummary:
    """Write a suite, a manifest and the evidence of a new run from MT-Bench judgment files."""
    run_dir = Path("runs") / run
    if DEFAULT_RUNS_FILE.exists() and run in {r.name for r in load_runs(DEFAULT_RUNS_FILE).runs}:
        raise KonkordError(
            f'run "{run}" is listed in {DEFAULT_RUNS_FILE}; import into a run name that is not '
            "listed there (--run NAME), then add it to runs.json if you want it published"
        )
    if EvidenceLog(run_dir).exists():
        raise KonkordError(
            f'run "{run}" already has evidence in {run_dir}; import into a new run '
            "(--run NAME) so no vote is counted twice"
        )
    data = read_dataset(paths)
    gpt4 = [v for v in data.votes if _kind(v.judge, v.where) == "gpt4"]
    experts = [v for v in data.votes if _kind(v.judge, v.where) == "expert"]
    authors = [v for v in data.votes if _kind(v.judge, v.where) == "author"]
    seen_items: dict[tuple[str, str, str], Vote] = {}
    for vote in gpt4:
        item = (vote.task_id, vote.model_a, vote.model_b)
        if item in seen_items:
            raise KonkordError(
                f"{vote.where}: a second GPT-4 pair vote on {item[0]} {item[1]} vs {item[2]} "
                f"(first at {seen_items[item].where}); a judge has one verdict per pair"
            )
        seen_items[item] = vote
    models = tuple(sorted({m for v in data.votes for m in (v.model_a, v.model_b)}))
    turns = sorted({(v.question_id, v.turn) for v in data.votes})
    suite = Suite(
        name="MT-Bench human judgments",
        rubric=RUBRIC,
        tasks=tuple(Task(id=task_id(q, t), prompt=_prompt(q, t, data, models)) for q, t in turns),
    )
    suite_path = Path("suites") / f"{run}.yaml"
    suite_path.parent.mkdir(parents=True, exist_ok=True)
    suite_path.write_text(
        yaml.safe_dump(
            suite.model_dump(mode="json", exclude_defaults=True),
            sort_keys=False,
            allow_unicode=True,
            width=100,
        )
    )
    write_manifest(RunSpec(name=run, suite_path=suite_path, suite=suite, models=models))
    spec = resolve_run(run)
    created = now_iso()
    answers = _answer_records(spec.suite, data, models, spec.settings, created)
    shas = {(r["task_id"], r["model"]): answer_sha(r["text"]) for r in answers}
    log = EvidenceLog(run_dir)
    alternate = itertools.cycle((True, False))
    log.append_many("answers", answers)
    log.append_many(
        "verdicts",
        [
            rec
            for vote in gpt4
            for rec in _order_records(
                vote,
                shas,
                created,
                first_shown_won=next(alternate) if vote.winner == "tie (inconsistent)" else True,
            )
        ],
    )
    labels = _label_records(experts + (authors if with_authors else []), created)
    log.append_many("labels", labels)
    kept = run_dir / "import"
    kept.mkdir(parents=True, exist_ok=True)
    if not with_authors:
        (kept / "author_votes.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "labeller": r["labeller"],
                        "task_id": r["task_id"],
                        "model_a": r["model_a"],
                        "model_b": r["model_b"],
                        "winner": r["winner"],
                    },
                    sort_keys=True,
                )
                + "\n"
                for r in _label_records(authors, created)
            )
        )
    (kept / "source.json").write_text(
        json.dumps({"source": SOURCE, "files": data.files, "imported_at": created}, indent=2) + "\n"
    )
    return ImportSummary(
        run=run,
        suite_path=suite_path,
        tasks=len(suite.tasks),
        models=models,
        labels=len(labels),
        labellers=len({r["labeller"].split("#")[0] for r in labels}),
        verdict_pairs=len(gpt4),
        answers=len(answers),
        author_votes=len(authors),
        authors_included=with_authors,
    )


def _answer_records(
    suite: Suite,
    data: Dataset,
    models: tuple[str, ...],
    settings: CallSettings,
    created: str,
) -> list[Record]:
    """Answer records keyed exactly as `konkord run` keys them, so the run's stages find them."""
    records = []
    for task in suite.tasks:
        question, turn = (int(part[1:]) for part in task.id.split("-"))
        for model in models:
            conversation = data.conversations.get((question, model))
            text = None if conversation is None else _answer_text(conversation, turn)
            if text is None:
                continue
            records.append(
                {
                    "kind": "answer",
                    "task_id": task.id,
                    "model": model,
                    "settings_hash": answer_key_hash(answer_messages(suite, task), settings),
                    "settings": settings.generation(),
                    "text": text,
                    "finish_reason": None,
                    "tokens_in": None,
                    "tokens_out": None,
                    "cost_usd": None,
                    "latency_s": None,
                    "error": None,
                    "error_kind": None,
                    "attempts": 0,
                    "source": "import",
                    "created_at": created,
                }
            )
    return records
