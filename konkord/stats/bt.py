"""Bradley-Terry on pair outcomes, fitted by a batched Newton method.

One fit and a thousand bootstrap fits run through the same code (`newton_bt`), so the
intervals come from exactly the estimator that gives the point estimate.

The model: P(a beats b) = sigmoid(beta_a - beta_b). A tie is half a win to each side, so the
data of a fit is one matrix `wins[a, b]` = total score of a against b; the comparison counts
are `wins + wins.T`. The prior is `prior` virtual wins and as many virtual losses of every
model against a virtual opponent of average strength (mean log-strength); it keeps a model that
wins or loses everything finite and pulls nothing else much. Log-strengths are reported with
mean 0, so ratings exp(beta) have geometric mean 1.
"""

from __future__ import annotations

# The data (pairs.py) and the fit (newton.py) live apart; every name is importable from here.
from .newton import (
    DEFAULT_MAX_ITER,
    DEFAULT_PRIOR,
    DEFAULT_TOL,
    BTFit,
    NewtonResult,
    fit_bt,
    fit_bt_wins,
    newton_bt,
    single_threaded_blas,
)
from .pairs import (
    BatchModelVector,
    BatchPairMatrix,
    BoolArray,
    Comparisons,
    FloatArray,
    IntArray,
    ModelVector,
    PairMatrix,
    TaskPairMatrix,
    comparisons,
    expected_win_rate,
    index_arrays,
    raw_win_rate,
    task_win_matrices,
    win_matrix,
    win_probability,
)

__all__ = [
    "DEFAULT_MAX_ITER",
    "DEFAULT_PRIOR",
    "DEFAULT_TOL",
    "BTFit",
    "BatchModelVector",
    "BatchPairMatrix",
    "BoolArray",
    "Comparisons",
    "FloatArray",
    "IntArray",
    "ModelVector",
    "NewtonResult",
    "PairMatrix",
    "TaskPairMatrix",
    "comparisons",
    "expected_win_rate",
    "fit_bt",
    "fit_bt_wins",
    "index_arrays",
    "newton_bt",
    "raw_win_rate",
    "single_threaded_blas",
    "task_win_matrices",
    "win_matrix",
    "win_probability",
]
