"""Agreement between two raters (a judge and a person, or two people) over {model a, model b, tie}.

Input representation: parallel integer arrays, one entry per comparison, coded

    0 = model a won, 1 = model b won, 2 = tie      (see CATEGORIES, TIE)

in model terms, never positions. A comparison is one (vote, vote) pair on the same item; an item
labelled by three people gives three judge-vs-person comparisons. Undefined figures (no
comparisons, a kappa whose chance agreement is 1) are NaN here and None in the results file,
never 0% or 100%.

Which model of a pair is "model a" is an accident of naming, so kappa is computed on the
confusion matrix that counts every comparison in both orientations (a/b and b/a swapped):
the chance agreement then no longer depends on which model happens to win most often under
the name "a". With two exchangeable raters (two people) the matrix also counts both rater
orders, so kappa does not depend on labeller ids. Agreement rates are unaffected by either.

Intervals of agreement rates are Wilson intervals on an effective sample size: the comparisons
of one task are not independent, so n is divided by the design effect measured from the
task-clustered (CR1 sandwich) variance, never below 1. The plain Wilson interval is kept beside
it, for published tables that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .diagnostics import wilson_interval
from .resample import bootstrap_interval, critical_value

CATEGORIES = ("model a", "model b", "tie")
TIE = 2

Codes = npt.NDArray[np.int_]
"""Shape (C,): one category code per comparison."""
FloatMatrix = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Agreement:
    """k agreeing of n comparisons with a Wilson 95% interval; NaN rate and bounds when n == 0.

    With clusters, `low`/`high` are the task-clustered interval, `plain_low`/`plain_high` the
    plain Wilson one that treats every comparison as independent, and `clusters` the number of
    tasks; without, the plain fields are NaN and `clusters` 0.
    """

    k: int
    n: int
    rate: float
    low: float
    high: float
    plain_low: float = float("nan")
    plain_high: float = float("nan")
    clusters: int = 0
    design_effect: float = 1.0


@dataclass(frozen=True)
class KappaEstimate:
    """Cohen's kappa and its bootstrap 95% interval (NaN where undefined)."""

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


def clustered_proportion(hits: npt.ArrayLike, clusters: npt.ArrayLike) -> Agreement:
    """Share of true `hits` with a Wilson interval on the task-clustered effective sample size.

    Design effect = CR1 cluster-robust variance of the share / binomial variance. The
    interval is the Wilson interval at n / design effect with the few-cluster critical value
    of `few_cluster_critical`, widened to contain the plain Wilson interval (so never narrower
    than it; `design_effect` is reported floored at 1). With fewer than 2 clusters, or every
    comparison alike, the clustering cannot be measured and the interval is plain Wilson.
    """
    hit = np.asarray(hits, dtype=bool)
    ids = np.asarray(clusters)
    if ids.shape != hit.shape:
        raise ValueError("clusters must give one id per comparison")
    k, n = int(hit.sum()), int(hit.size)
    plain = proportion(k, n)
    if n == 0:
        return plain
    _, cluster = np.unique(ids, return_inverse=True)
    g = int(cluster.max()) + 1
    p = k / n
    deff = 1.0
    low, high = plain.low, plain.high
    if g >= 2 and 0.0 < p < 1.0:
        k_g = np.bincount(cluster, weights=hit.astype(np.float64), minlength=g)
        n_g = np.bincount(cluster, minlength=g).astype(np.float64)
        robust = g / (g - 1.0) * float(((k_g - p * n_g) ** 2).sum()) / (n * n)
        measured = robust / (p * (1.0 - p) / n)
        deff = max(1.0, measured)
        if measured > 0.0:
            n_eff = n / measured
            c_low, c_high = wilson_interval(p * n_eff, n_eff, critical=few_cluster_critical(g))
            low, high = min(low, c_low), max(high, c_high)
    return Agreement(k, n, p, low, high, plain.low, plain.high, g, deff)


def few_cluster_critical(n_clusters: int, level: float = 0.95) -> float:
    """The expanded critical value sqrt(G/(G-1)) t_{G-1} of G clusters (as the ranking's
    intervals use), for a clustered interval of few tasks; the normal one below 2.

    A variance estimated from G task totals has G - 1 degrees of freedom: with the normal
    1.96 the clustered agreement interval covered 88-92% at 10 tasks of uneven size and
    strong task effects (benchmarks/bench_validity.py, section f); with this one, 93-96%.
    """
    return critical_value(level, n_clusters if n_clusters >= 2 else None)


def exact_agreement(
    x: npt.ArrayLike, y: npt.ArrayLike, clusters: npt.ArrayLike | None = None
) -> Agreement:
    """Share of comparisons where both raters chose the same category (ties included);
    with `clusters` (the task of each comparison) the interval is task-clustered."""
    a, b = _pair(x, y)
    if clusters is not None:
        return clustered_proportion(a == b, clusters)
    return proportion(int((a == b).sum()), int(a.size))


def agreement_without_ties(
    x: npt.ArrayLike, y: npt.ArrayLike, clusters: npt.ArrayLike | None = None
) -> Agreement:
    """Agreement on the comparisons where neither rater said tie, the way published tables
    (e.g. MT-Bench's "without ties") count it: a comparison with a tie on either side is dropped."""
    a, b = _pair(x, y)
    keep = (a != TIE) & (b != TIE)
    ids = None if clusters is None else np.asarray(clusters)[keep]
    return exact_agreement(a[keep], b[keep], ids)


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
    """Cohen's kappa of two raters over the three categories as coded (NaN where undefined).

    This depends on which model is "a"; the published figure is `oriented_kappa`."""
    return float(kappa_from_confusion(confusion_matrix(x, y)))


SWAP = np.array([1, 0, 2])
"""Category codes with model a and model b exchanged (a tie stays a tie)."""


def both_orientations(confusion: npt.ArrayLike, exchangeable: bool = False) -> FloatMatrix:
    """A confusion matrix (..., 3, 3) counted in both pair orientations (a/b swapped), and with
    `exchangeable` raters in both rater orders too (the matrix plus its transpose)."""
    conf = np.asarray(confusion, dtype=np.float64)
    out = conf + conf[..., SWAP, :][..., :, SWAP]
    if exchangeable:
        out = out + np.swapaxes(out, -1, -2)
    result: FloatMatrix = out
    return result


def oriented_kappa(x: npt.ArrayLike, y: npt.ArrayLike, exchangeable: bool = False) -> float:
    """Kappa counting every comparison in both orientations: invariant to how the models are
    named and which one of a pair is listed first; with `exchangeable`, to the raters' order."""
    return float(kappa_from_confusion(both_orientations(confusion_matrix(x, y), exchangeable)))


def kappa_bootstrap(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    oriented: bool = True,
    exchangeable: bool = False,
) -> KappaEstimate:
    """Kappa (`oriented_kappa`, or plain Cohen's with `oriented=False`) with a seeded
    bootstrap 95% interval (`few_cluster_kappa_interval`), never narrower than `_kappa_floor`.

    With `clusters` (one integer id per comparison, e.g. the task), whole clusters are resampled,
    because comparisons on the same task are not independent; without, single comparisons are.
    Vectorised: one confusion matrix per cluster, then each resample is a weighted sum. Resamples
    where kappa is undefined are left out of the percentiles; with fewer than half defined the
    interval is NaN rather than a figure drawn from the lucky few.
    """
    a, b = _pair(x, y)

    def counted(conf: npt.ArrayLike) -> npt.ArrayLike:
        return both_orientations(conf, exchangeable) if oriented else conf

    value = float(kappa_from_confusion(counted(confusion_matrix(a, b))))
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
    kappas = kappa_from_confusion(counted((weights @ per_cluster).reshape(n_resamples, k, k)))
    defined = kappas[np.isfinite(kappas)]
    if defined.size * 2 < n_resamples:
        return KappaEstimate(value, nan, nan, n_resamples, int(defined.size))
    low, high = few_cluster_kappa_interval(value, defined, per_cluster, counted)
    floor_low, floor_high = _kappa_floor(a, b, counted)
    return KappaEstimate(
        value,
        float(min(low, floor_low)),
        float(max(high, floor_high)),
        n_resamples,
        int(defined.size),
    )


def few_cluster_kappa_interval(
    value: float,
    draws: npt.NDArray[np.float64],
    per_cluster: FloatMatrix,
    counted: Callable[[Any], Any],
    level: float = 0.95,
) -> tuple[float, float]:
    """Expanded BCa interval of kappa from its defined cluster-bootstrap `draws`.

    Kappa is a ratio whose bootstrap distribution is skewed and whose spread a few tasks
    understate: the plain percentile interval covered 89-93% at 10 and 25 tasks with strong
    task effects and uneven task sizes. BCa (bias and acceleration from the leave-one-task-out
    kappas) with the few-cluster expansion sqrt(G/(G-1)) t_{G-1} of the ranking's intervals
    corrects both (benchmarks/bench_validity.py, section f).
    """
    n_clusters = per_cluster.shape[0]
    k = len(CATEGORIES)
    left_out = per_cluster.sum(axis=0) - per_cluster
    jack = kappa_from_confusion(counted(left_out.reshape(n_clusters, k, k)))
    jackknife = jack if n_clusters > 2 and np.isfinite(jack).all() else None
    interval = bootstrap_interval(
        np.asarray(value),
        draws,
        level=level,
        method="bca",
        jackknife=jackknife,
        n_units=n_clusters if n_clusters > 1 else None,
    )
    return float(interval.lower), float(interval.upper)


def _kappa_floor(a: Codes, b: Codes, counted: Callable[[Any], Any]) -> tuple[float, float]:
    """Kappa at the Wilson bounds of the observed agreement, chance agreement held fixed: what
    the raw counts allow even if every comparison were independent. With one task, or all
    comparisons alike, the bootstrap has nothing to resample and would give a point."""
    conf = np.asarray(counted(confusion_matrix(a, b)), dtype=np.float64)
    total = conf.sum()
    chance = float((conf.sum(axis=1) * conf.sum(axis=0)).sum() / (total * total))
    if not chance < 1.0:
        return float("nan"), float("nan")
    w_low, w_high = wilson_interval(int((a == b).sum()), int(a.size))
    return (w_low - chance) / (1.0 - chance), (w_high - chance) / (1.0 - chance)


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
