"""Import the MT-Bench human judgments (Zheng et al. 2023) into a Konkord run.

Reads the dataset in its published forms: the Hugging Face rows (JSONL, JSON or Parquet, with
`conversation_a`/`conversation_b`), and the labels-only JSONL (judge, model_a, model_b,
question_id, turn, winner). A task is one (question, turn), id `q81-t1`. Expert votes become
labels with the expert id as labeller; an expert's second vote on the same item is labeller
`expert_3#2` (the evidence key holds one label per labeller and item, and no vote may be lost).
Author votes are kept apart in runs/<run>/import/author_votes.jsonl unless asked for, as the
published comparison leaves them out. GPT-4 pair votes become the combined verdicts of judge
`gpt4_pair`, written as two order records that `konkord.evidence.verdicts.combine_verdicts` combines back.
With conversations, the answers are imported too, so `konkord judge` can judge the same pairs.

Reading lives in `mtbench_read`, record building in `mtbench_records`; this module writes the run.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from konkord.configuration.names import SLUG, slug_problem
from konkord.configuration.runs_config import DEFAULT_RUNS_FILE, load_runs, runs_file_present
from konkord.configuration.runspec import RunSpec, resolve_run, write_manifest
from konkord.configuration.suite import Suite, Task
from konkord.errors import KonkordError
from konkord.evidence.atomic import write_atomic
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.evidence.paths import require_folder_inside, require_inside, require_state_inside
from konkord.evidence.verdicts import answer_sha
from konkord.importers.mtbench_read import JUDGE, Vote, read_dataset, task_id, vote_kind
from konkord.importers.mtbench_records import (
    SOURCE,
    answer_records,
    label_records,
    order_records,
    task_prompt,
)

__all__ = ["DEFAULT_RUN", "JUDGE", "RUBRIC", "ImportSummary", "import_mtbench"]

DEFAULT_RUN = "mt-bench-human"
RUBRIC = (
    "Choose the answer that follows the user's instructions and answers the user's question "
    "better. Consider helpfulness, relevance, accuracy, depth, creativity and level of detail. "
    "Do not let the order of the answers, their length or the assistants' names influence you."
)


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


def import_mtbench(
    paths: Sequence[Path], run: str = DEFAULT_RUN, with_authors: bool = False
) -> ImportSummary:
    """Write a suite, a manifest and the evidence of a new run from MT-Bench judgment files,
    holding the run's writer lock: two imports into one new run at once would both pass the
    "already has evidence" check and record every vote twice."""
    from konkord.evidence.stopping import run_lock

    if not SLUG.match(run):
        raise KonkordError(f"run name {slug_problem(run)}: --run")
    run_dir = Path("runs") / run
    require_folder_inside(run_dir, "the run folder")
    require_inside(Path("suites") / f"{run}.yaml", "the suite file")
    require_state_inside()
    if runs_file_present() and run in {r.name for r in load_runs(DEFAULT_RUNS_FILE).runs}:
        raise KonkordError(
            f'run "{run}" is listed in {DEFAULT_RUNS_FILE}; import into a run name that is not '
            "listed there (--run NAME), then add it to runs.json if you want it published"
        )
    # Everything above writes nothing; the lock (a file under .konkord) comes after it.
    with run_lock(run_dir, "import"):
        return _import_mtbench(paths, run, with_authors)


def _import_mtbench(paths: Sequence[Path], run: str, with_authors: bool) -> ImportSummary:
    run_dir = Path("runs") / run
    if EvidenceLog(run_dir).exists():
        raise KonkordError(
            f'run "{run}" already has evidence in {run_dir}; import into a new run '
            "(--run NAME) so no vote is counted twice"
        )
    data = read_dataset(paths)
    gpt4 = [v for v in data.votes if vote_kind(v.judge, v.where) == "gpt4"]
    experts = [v for v in data.votes if vote_kind(v.judge, v.where) == "expert"]
    authors = [v for v in data.votes if vote_kind(v.judge, v.where) == "author"]
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
        tasks=tuple(
            Task(id=task_id(q, t), prompt=task_prompt(q, t, data, models)) for q, t in turns
        ),
    )
    suite_path = Path("suites") / f"{run}.yaml"
    suite_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(
        suite_path,
        yaml.safe_dump(
            suite.model_dump(mode="json", exclude_defaults=True),
            sort_keys=False,
            allow_unicode=True,
            width=100,
        ),
    )
    write_manifest(RunSpec(name=run, suite_path=suite_path, suite=suite, models=models))
    spec = resolve_run(run)
    created = now_iso()
    answers = answer_records(spec.suite, data, models, spec.settings, created)
    shas = {(r["task_id"], r["model"]): answer_sha(r["text"]) for r in answers}
    log = EvidenceLog(run_dir)
    alternate = itertools.cycle((True, False))
    log.append_many("answers", answers)
    log.append_many(
        "verdicts",
        [
            rec
            for vote in gpt4
            for rec in order_records(
                vote,
                shas,
                created,
                first_shown_won=next(alternate) if vote.winner == "tie (inconsistent)" else True,
            )
        ],
    )
    labels = label_records(experts + (authors if with_authors else []), created)
    log.append_many("labels", labels)
    kept = run_dir / "import"
    kept.mkdir(parents=True, exist_ok=True)
    if not with_authors:
        write_atomic(
            kept / "author_votes.jsonl",
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
                for r in label_records(authors, created)
            ),
        )
    write_atomic(
        kept / "source.json",
        json.dumps({"source": SOURCE, "files": data.files, "imported_at": created}, indent=2)
        + "\n",
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
