"""The cascade's rule and what it is worth: which pairs a cheap first-pass judge may decide, and
how often people agree with it on those (selective accuracy) as the threshold moves.

The rule: a pair is accepted when the first pass gave the same verdict in both orders and its
averaged confidence in that verdict reaches the threshold. Averaging alone is not enough: one
order at 0.99 for B and the other at 0.48 for B (so leaning A) average to 0.735 for B, a
confident-looking wrong lean that only the disagreement of the orders exposes.

Outcomes are coded in model terms: 0 = model_a won, 1 = model_b won, 2 = tie. Probabilities are
arrays (pairs, 3) in the same terms, each order already turned to the original orientation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .diagnostics import wilson_interval

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

THRESHOLDS = tuple(round(0.5 + 0.05 * k, 2) for k in range(10))  # 0.5, 0.55, ..., 0.95
_SLACK = 1e-9  # an averaged 0.8 that floating point renders 0.7999999 still reaches 0.8


def averaged(probs_ab: FloatArray, probs_ba: FloatArray) -> FloatArray:
    """The two orders' probabilities averaged, per pair: (pairs, 3)."""
    total: FloatArray = np.asarray(probs_ab, float) + np.asarray(probs_ba, float)
    return total / 2.0


def lean(probs_ab: FloatArray, probs_ba: FloatArray) -> IntArray:
    """The outcome the averaged probabilities favour (shown for escalated pairs, not trusted)."""
    out: IntArray = np.argmax(averaged(probs_ab, probs_ba), axis=1).astype(np.int64)
    return out


def confidence(probs_ab: FloatArray, probs_ba: FloatArray, verdict_ab: IntArray) -> FloatArray:
    """The averaged probability of the first order's verdict, per pair."""
    avg = averaged(probs_ab, probs_ba)
    return avg[np.arange(len(avg)), np.asarray(verdict_ab, np.int64)]


def accepted(
    probs_ab: FloatArray,
    probs_ba: FloatArray,
    verdict_ab: IntArray,
    verdict_ba: IntArray,
    threshold: float,
) -> BoolArray:
    """Whether the first pass decides each pair: orders agree and averaged confidence >= threshold."""
    agree = np.asarray(verdict_ab) == np.asarray(verdict_ba)
    conf = confidence(probs_ab, probs_ba, verdict_ab)
    return np.asarray(agree & (conf >= threshold - _SLACK), dtype=bool)


@dataclass(frozen=True)
class Rate:
    """k of n with a Wilson 95% interval (nan bounds when n is 0)."""

    k: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float | None:
        """k / n, or None when there is nothing to divide by."""
        return self.k / self.n if self.n else None


def rate(k: int, n: int) -> Rate:
    """A `Rate` with its Wilson interval."""
    low, high = wilson_interval(k, n)
    return Rate(int(k), int(n), low, high)


@dataclass(frozen=True)
class SelectiveRow:
    """One threshold: how much the first pass decides and how right it is there."""

    threshold: float
    decided: Rate  # pairs the first pass decides, of all pairs it judged in both orders
    agreement: Rate  # labels agreeing with the first pass, on the decided labelled pairs
    one_order_decided: Rate  # each order on its own (no agreement check), both orders pooled
    one_order_agreement: Rate
    lean_right: Rate  # on escalated labelled pairs: how often the averaged lean matched people


def selective_table(
    probs_ab: FloatArray,
    probs_ba: FloatArray,
    verdict_ab: IntArray,
    verdict_ba: IntArray,
    label_pair: IntArray,
    label_outcome: IntArray,
    thresholds: tuple[float, ...] = THRESHOLDS,
) -> list[SelectiveRow]:
    """The selective-accuracy table over the first pass's pairs and people's labels.

    `label_pair[k]` is the index of the pair the k-th label is about, `label_outcome[k]` its
    outcome; a pair labelled by two people counts twice in the agreement figures, once per
    label, as in the rest of the calibration. The one-order columns treat each order as a judge
    asked once: its verdict, accepted when its own probability of that verdict reaches the
    threshold; both orders are pooled (pairs and labels count twice), so the figure does not
    depend on which model happens to be shown first, i.e. on the models' names."""
    probs_ab = np.asarray(probs_ab, float).reshape(-1, 3)
    probs_ba = np.asarray(probs_ba, float).reshape(-1, 3)
    verdict_ab = np.asarray(verdict_ab, np.int64)
    verdict_ba = np.asarray(verdict_ba, np.int64)
    label_pair = np.asarray(label_pair, np.int64)
    label_outcome = np.asarray(label_outcome, np.int64)
    pairs = len(verdict_ab)
    leans = lean(probs_ab, probs_ba)
    rows_at = np.arange(pairs)
    own = {"ab": probs_ab[rows_at, verdict_ab], "ba": probs_ba[rows_at, verdict_ba]}
    said = {"ab": verdict_ab, "ba": verdict_ba}
    rows = []
    for threshold in thresholds:
        ok = accepted(probs_ab, probs_ba, verdict_ab, verdict_ba, threshold)
        on_ok = ok[label_pair]
        right = verdict_ab[label_pair] == label_outcome
        single = {o: own[o] >= threshold - _SLACK for o in said}
        single_decided = sum(int(single[o].sum()) for o in said)
        single_n = sum(int(single[o][label_pair].sum()) for o in said)
        single_k = sum(
            int((single[o][label_pair] & (said[o][label_pair] == label_outcome)).sum())
            for o in said
        )
        rows.append(
            SelectiveRow(
                threshold=float(threshold),
                decided=rate(int(ok.sum()), pairs),
                agreement=rate(int((on_ok & right).sum()), int(on_ok.sum())),
                one_order_decided=rate(single_decided, 2 * pairs),
                one_order_agreement=rate(single_k, single_n),
                lean_right=rate(
                    int((~on_ok & (leans[label_pair] == label_outcome)).sum()),
                    int((~on_ok).sum()),
                ),
            )
        )
    return rows


@dataclass(frozen=True)
class CascadeVsStrong:
    """The whole cascade and the strong judge alone, on the labelled pairs both decided."""

    cascade: Rate
    strong: Rate
    labels: int  # labels compared (pairs with a strong verdict in both orders)
    labels_total: int  # labels on pairs the first pass judged in both orders


def cascade_vs_strong(
    decided: BoolArray,
    first_outcome: IntArray,
    strong_outcome: IntArray,
    label_pair: IntArray,
    label_outcome: IntArray,
) -> CascadeVsStrong:
    """Agreement with people of the cascade's final verdict and of the strong judge's own.

    `strong_outcome` is -1 where the strong judge has no complete verdict; those labels are
    left out of both figures, so the two are measured on the same labels."""
    decided = np.asarray(decided, bool)
    first_outcome = np.asarray(first_outcome, np.int64)
    strong_outcome = np.asarray(strong_outcome, np.int64)
    label_pair = np.asarray(label_pair, np.int64)
    label_outcome = np.asarray(label_outcome, np.int64)
    final = np.where(decided, first_outcome, strong_outcome)
    has_strong = strong_outcome[label_pair] >= 0
    n = int(has_strong.sum())
    k_cascade = int((has_strong & (final[label_pair] == label_outcome)).sum())
    k_strong = int((has_strong & (strong_outcome[label_pair] == label_outcome)).sum())
    return CascadeVsStrong(rate(k_cascade, n), rate(k_strong, n), n, len(label_pair))
