"""Agreement between two raters (a judge and a person, or two people) over {model a, model b, tie}.

Input representation: parallel integer arrays, one entry per comparison, coded

    0 = model a won, 1 = model b won, 2 = tie      (see CATEGORIES, TIE)

in model terms, never positions. A comparison is one (vote, vote) pair on the same item; an item
labelled by three people gives three judge-vs-person comparisons. Undefined figures (no
comparisons, a kappa whose chance agreement is 1) are NaN here and None in the results file,
never 0% or 100%.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .diagnostics import wilson_interval

CATEGORIES = ("model a", "model b", "tie")
TIE = 2

Codes = npt.NDArray[np.int_]
"""Shape (C,): one category code per comparison."""


@dataclass(frozen=True)
class Agreement:
    """k agreeing of n comparisons with a Wilson 95% interval; NaN rate and bounds when n == 0."""

    k: int
    n: int
    rate: float
    low: float
    high: float


@dataclass(frozen=True)
class KappaEstimate:
    """Cohen's kappa and its percentile-bootstrap 95% interval (NaN where undefined)."""

    value: float
    low: float
    high: float
    resamples: int
    defined_resamples: int


@dataclass(frozen=True)
class LengthQuartiles:
    """Quartile index (0..3) per comparison and each quartile's observed length range."""

    quartile: Codes
    ranges: tuple[tuple[int, int] | None, ...]


def _codes(values: Sequence[int] | npt.ArrayLike) -> Codes:
    arr = np.asarray(values, dtype=np.int_)
    if arr.ndim != 1:
        raise ValueError("category codes must be a 1-d array")
    if arr.size and (arr.min() < 0 or arr.max() >= len(CATEGORIES)):
        raise ValueError(f"category codes must be in 0..{len(CATEGORIES) - 1}")
    return arr


def _pair(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[Codes, Codes]:
    a, b = _codes(x), _codes(y)
    if a.shape != b.shape:
        raise ValueError(f"rater arrays differ in length ({a.size} and {b.size})")
    return a, b


def proportion(k: int, n: int) -> Agreement:
    """k of n with its Wilson 95% interval."""
    if n == 0:
        nan = float("nan")
        return Agreement(0, 0, nan, nan, nan)
    low, high = wilson_interval(k, n)
    return Agreement(int(k), int(n), k / n, low, high)


def exact_agreement(x: npt.ArrayLike, y: npt.ArrayLike) -> Agreement:
    """Share of comparisons where both raters chose the same category (ties included)."""
    a, b = _pair(x, y)
    return proportion(int((a == b).sum()), int(a.size))


def agreement_without_ties(x: npt.ArrayLike, y: npt.ArrayLike) -> Agreement:
    """Agreement on the comparisons where neither rater said tie, the way published tables
    (e.g. MT-Bench's "without ties") count it: a comparison with a tie on either side is dropped."""
    a, b = _pair(x, y)
    keep = (a != TIE) & (b != TIE)
    return exact_agreement(a[keep], b[keep])


def confusion_matrix(x: npt.ArrayLike, y: npt.ArrayLike) -> npt.NDArray[np.int_]:
    """Counts with rows = rater x's category and columns = rater y's, shape (3, 3)."""
    a, b = _pair(x, y)
    k = len(CATEGORIES)
    return np.bincount(a * k + b, minlength=k * k).reshape(k, k)


def kappa_from_confusion(confusion: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Cohen's kappa of one (K, K) confusion matrix or a batch (..., K, K); NaN when the chance
    agreement is 1 (both raters used one and the same category) or there are no comparisons."""
    conf = np.asarray(confusion, dtype=np.float64)
    total = conf.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(conf, axis1=-2, axis2=-1) / total
        rows = conf.sum(axis=-1) / total[..., None]
        cols = conf.sum(axis=-2) / total[..., None]
        chance = (rows * cols).sum(axis=-1)
        kappa = (observed - chance) / (1.0 - chance)
    kappa = np.where(np.isclose(chance, 1.0) | (total == 0), np.nan, kappa)
    return np.asarray(kappa, dtype=np.float64)


def cohens_kappa(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Cohen's kappa of two raters over the three categories (NaN where undefined)."""
    return float(kappa_from_confusion(confusion_matrix(x, y)))


def kappa_bootstrap(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> KappaEstimate:
    """Cohen's kappa with a seeded percentile-bootstrap 95% interval.

    With `clusters` (one integer id per comparison, e.g. the task), whole clusters are resampled,
    because comparisons on the same task are not independent; without, single comparisons are.
    Vectorised: one confusion matrix per cluster, then each resample is a weighted sum. Resamples
    where kappa is undefined are left out of the percentiles; with fewer than half defined the
    interval is NaN rather than a figure drawn from the lucky few.
    """
    a, b = _pair(x, y)
    value = cohens_kappa(a, b)
    nan = float("nan")
    if a.size == 0:
        return KappaEstimate(nan, nan, nan, n_resamples, 0)
    ids = np.arange(a.size) if clusters is None else np.asarray(clusters)
    if ids.shape != a.shape:
        raise ValueError("clusters must give one id per comparison")
    _, cluster = np.unique(ids, return_inverse=True)
    n_clusters = int(cluster.max()) + 1
    k = len(CATEGORIES)
    per_cluster = np.zeros((n_clusters, k * k))
    np.add.at(per_cluster, (cluster, a * k + b), 1.0)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_clusters, size=(n_resamples, n_clusters))
    weights = np.zeros((n_resamples, n_clusters))
    np.add.at(weights, (np.repeat(np.arange(n_resamples), n_clusters), draws.ravel()), 1.0)
    kappas = kappa_from_confusion((weights @ per_cluster).reshape(n_resamples, k, k))
    defined = kappas[np.isfinite(kappas)]
    if defined.size * 2 < n_resamples:
        return KappaEstimate(value, nan, nan, n_resamples, int(defined.size))
    low, high = np.percentile(defined, [2.5, 97.5])
    return KappaEstimate(value, float(low), float(high), n_resamples, int(defined.size))


def grouped_agreement(
    x: npt.ArrayLike, y: npt.ArrayLike, groups: Sequence[str]
) -> dict[str, Agreement]:
    """Exact agreement within each group (a task, a model pair...), in first-seen group order."""
    a, b = _pair(x, y)
    if len(groups) != a.size:
        raise ValueError("groups must give one key per comparison")
    keys = np.asarray(groups, dtype=object)
    out: dict[str, Agreement] = {}
    for key in dict.fromkeys(groups):
        mask = keys == key
        out[key] = exact_agreement(a[mask], b[mask])
    return out


def length_quartiles(lengths: npt.ArrayLike) -> LengthQuartiles:
    """Split comparisons into answer-length quartiles at the 25/50/75th percentiles.

    Equal lengths always fall in the same quartile, so with many ties a quartile can be empty
    (its range is None); each range is the observed min and max length inside the quartile.
    """
    arr = np.asarray(lengths, dtype=np.float64)
    if arr.size == 0:
        return LengthQuartiles(np.zeros(0, dtype=np.int_), (None, None, None, None))
    edges = np.percentile(arr, [25, 50, 75])
    quartile = np.searchsorted(edges, arr, side="left").astype(np.int_)
    ranges: list[tuple[int, int] | None] = []
    for q in range(4):
        inside = arr[quartile == q]
        ranges.append((int(inside.min()), int(inside.max())) if inside.size else None)
    return LengthQuartiles(quartile, tuple(ranges))
