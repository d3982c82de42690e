"""What a person labels next: the comparison pool and a seeded, stratified labelling queue.

Labels are worth most when they spread across tasks and model pairs, so the queue walks the
tasks round-robin in a seeded shuffled order and, within a task, its pairs in a seeded order
that is rotated per task (so the first pass over the tasks already covers many pairs). The
queue is a pure function of the pool, the labels already given, the labeller and the seed: a
session that stops can be restarted with the same seed and continues where it left off.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from konkord.configuration.runspec import RunSpec
    from konkord.evidence.log import EvidenceLog

Record = dict[str, Any]
LabelKey = tuple[str, str, str, str]
Choice = Literal["1", "2", "tie"]

# Labels from simulated people cannot measure human-against-human agreement, so a second
# labeller's overlap half is drawn only from items a real (or imported) labeller labelled.
OVERLAP_SOURCES = frozenset({"human", "import"})


@dataclass(frozen=True, order=True)
class Comparison:
    """One task and an unordered model pair, stored as model_a < model_b."""

    task_id: str
    model_a: str
    model_b: str

    def __post_init__(self) -> None:
        if not self.model_a < self.model_b:
            raise ValueError(f"a comparison needs model_a < model_b, got {self.model_a!r}, "
                             f"{self.model_b!r}")

    def label_key(self, labeller: str) -> LabelKey:
        """The key of this labeller's label for this comparison in the labels stream."""
        return (self.task_id, self.model_a, self.model_b, labeller)


@dataclass(frozen=True)
class QueueItem:
    """A comparison as one labeller sees it: which model's answer is shown as Answer 1."""

    comparison: Comparison
    shown_first: str

    @property
    def shown_second(self) -> str:
        """The model whose answer is shown as Answer 2."""
        c = self.comparison
        return c.model_b if self.shown_first == c.model_a else c.model_a

    def winner_for(self, choice: Choice) -> str:
        """The winner in model terms for a choice made in screen terms (Answer 1, 2, or tie)."""
        if choice == "1":
            return self.shown_first
        if choice == "2":
            return self.shown_second
        if choice == "tie":
            return "tie"
        raise ValueError(f"unknown choice {choice!r} (expected '1', '2' or 'tie')")


@dataclass(frozen=True)
class LabelQueue:
    """What is left for one labeller: `items` in order, and progress as `done` of `total`."""

    items: list[QueueItem]
    done: int
    total: int
    overlap_items: frozenset[Comparison] = field(default_factory=frozenset)

    @property
    def finished(self) -> bool:
        """Whether this labeller has nothing left to label in this session."""
        return not self.items


def good_answer(record: Record | None) -> bool:
    """An answer that can be compared: it exists, did not fail, and has some text."""
    if record is None or record.get("error") is not None:
        return False
    text = record.get("text")
    return isinstance(text, str) and bool(text.strip())


def comparison_pool(
    answers: Mapping[tuple[str, str], Record],
    task_ids: Sequence[str],
    models: Sequence[str],
) -> list[Comparison]:
    """Every task and model pair (model_a < model_b) where both models have a good answer.

    `answers` is `konkord.stages.run.current_answers(...)`; tasks keep the suite's order and
    pairs are sorted, so the pool is the same list wherever it is computed.
    """
    ordered_models = sorted(set(models))
    pool: list[Comparison] = []
    for task_id in task_ids:
        answered = [m for m in ordered_models if good_answer(answers.get((task_id, m)))]
        for i, model_a in enumerate(answered):
            for model_b in answered[i + 1 :]:
                pool.append(Comparison(task_id, model_a, model_b))
    return pool


def pool_for_run(spec: RunSpec, log: EvidenceLog) -> list[Comparison]:
    """The comparison pool of a run: its current answers, its suite's tasks, its models."""
    from konkord.stages.run import current_answers

    answers = current_answers(log, spec.suite, spec.settings)
    return comparison_pool(answers, spec.suite.judged_ids(), spec.models)


def _rotated(pair_rank: dict[tuple[str, str], int], shift: int) -> Callable[[Comparison], int]:
    """A sort key: a comparison's pair rank, rotated by `shift` places."""

    def key(comparison: Comparison) -> int:
        return (pair_rank[(comparison.model_a, comparison.model_b)] - shift) % len(pair_rank)

    return key


def stratified_order(pool: Sequence[Comparison], seed: int) -> list[Comparison]:
    """The whole pool in labelling order: round-robin over seeded shuffled tasks, then pairs."""
    rng = random.Random(f"konkord-label-order:{seed}")
    tasks = sorted({c.task_id for c in pool})
    rng.shuffle(tasks)
    pairs = sorted({(c.model_a, c.model_b) for c in pool})
    rng.shuffle(pairs)
    pair_rank = {pair: rank for rank, pair in enumerate(pairs)}
    by_task: dict[str, list[Comparison]] = {task: [] for task in tasks}
    for comparison in pool:
        by_task[comparison.task_id].append(comparison)
    for position, task in enumerate(tasks):
        # Rotating the pair order by the task's position makes the first pass over the tasks
        # cover different pairs instead of the same "first" pair on every task.
        by_task[task].sort(key=_rotated(pair_rank, position))
    ordered: list[Comparison] = []
    for rank in range(max((len(v) for v in by_task.values()), default=0)):
        for task in tasks:
            if rank < len(by_task[task]):
                ordered.append(by_task[task][rank])
    return ordered


def orientation(comparison: Comparison, seed: int, labeller: str) -> str:
    """The model shown as Answer 1: a fair coin per item, fixed by the seed and the labeller.

    A hash rather than a random stream, so it does not depend on where the item falls in the
    queue; the labeller is part of it so two people do not share one position bias.
    """
    blob = f"{seed}\x1f{labeller}\x1f{comparison.task_id}\x1f{comparison.model_a}\x1f"
    blob += comparison.model_b
    digest = hashlib.sha256(blob.encode()).digest()
    return comparison.model_a if digest[0] % 2 == 0 else comparison.model_b


def queue_item(comparison: Comparison, seed: int, labeller: str) -> QueueItem:
    """A comparison with the orientation this labeller sees it in."""
    return QueueItem(comparison, orientation(comparison, seed, labeller))


def label_queue(
    pool: Sequence[Comparison],
    labels: Mapping[LabelKey, Record],
    labeller: str,
    seed: int,
    n: int,
    overlap: float = 0.5,
    skip: Collection[Comparison] = (),
) -> LabelQueue:
    """What `labeller` should label next, at most `n` labels in all.

    `labels` is `konkord.stages.label.labels.current_labels(log)` (withdrawn labels already dropped):
    items this labeller labelled count as done and are not offered again. When other people
    have labelled, a share `overlap` of this labeller's `n` is drawn from their items, so that
    human-against-human agreement can be measured; the rest from items nobody labelled.
    `skip` (items skipped in this session) are left out, and later items move up in their place.
    """
    if n < 0:
        raise ValueError("n must not be negative")
    if not 0.0 <= overlap <= 1.0:
        raise ValueError("overlap must be between 0 and 1")
    in_pool = set(pool)
    mine: set[Comparison] = set()
    others: set[Comparison] = set()
    for (task_id, model_a, model_b, who), record in labels.items():
        if record.get("winner") is None:
            continue
        comparison = Comparison(task_id, model_a, model_b)
        if comparison not in in_pool:
            continue
        if who == labeller:
            mine.add(comparison)
        elif record.get("source", "human") in OVERLAP_SOURCES:
            others.add(comparison)
    done = len(mine)
    room = max(0, n - done)
    skipped = set(skip)
    candidates = [c for c in stratified_order(pool, seed) if c not in mine and c not in skipped]
    if others and overlap > 0:
        chosen = _mix(candidates, others, mine, n, overlap, room)
    else:
        chosen = candidates[:room]
    items = [queue_item(c, seed, labeller) for c in chosen]
    return LabelQueue(items=items, done=done, total=done + len(items),
                      overlap_items=frozenset(others))


def _mix(
    candidates: list[Comparison],
    others: set[Comparison],
    mine: set[Comparison],
    n: int,
    overlap: float,
    room: int,
) -> list[Comparison]:
    """Alternate items others labelled with fresh ones until each half of `n` is met.

    The targets count labels already given, so a resumed session keeps the same split; when
    one kind runs out, the other fills the rest of the queue in stratified order.
    """
    target_shared = round(n * overlap)
    done_shared = len(mine & others)
    need_shared = max(0, target_shared - done_shared)
    need_fresh = max(0, (n - target_shared) - (len(mine) - done_shared))
    position = {c: i for i, c in enumerate(candidates)}
    shared = [c for c in candidates if c in others]
    fresh = [c for c in candidates if c not in others]
    chosen: list[Comparison] = []
    si = fi = 0
    while len(chosen) < room:
        want_shared = si < need_shared and si < len(shared)
        want_fresh = fi < need_fresh and fi < len(fresh)
        if want_shared and (not want_fresh or si <= fi):
            chosen.append(shared[si])
            si += 1
        elif want_fresh:
            chosen.append(fresh[fi])
            fi += 1
        elif si < len(shared) or fi < len(fresh):
            # One half is met or exhausted: fill from what is left, in stratified order.
            next_shared = shared[si] if si < len(shared) else None
            next_fresh = fresh[fi] if fi < len(fresh) else None
            if next_fresh is None or (
                next_shared is not None
                and position[next_shared] < position[next_fresh]
            ):
                chosen.append(shared[si])
                si += 1
            else:
                chosen.append(fresh[fi])
                fi += 1
        else:
            break
    return chosen
