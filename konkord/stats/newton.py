"""The Bradley-Terry fit: a batched Newton method with step halving, for one fit and for a
thousand bootstrap fits alike (see bt.py for the model and the prior)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
from threadpoolctl import ThreadpoolController

from .pairs import (
    CHUNK_ELEMENTS,
    BatchModelVector,
    BatchPairMatrix,
    BoolArray,
    Comparisons,
    FloatArray,
    IntArray,
    ModelVector,
    PairMatrix,
    expected_win_rate,
    raw_win_rate,
    win_matrix,
)
from .threads import default_threads

DEFAULT_PRIOR = 0.5
DEFAULT_TOL = 1e-9
DEFAULT_MAX_ITER = 100
_MAX_HALVINGS = 30
_single_blas_depth = 0  # single_threaded_blas() blocks in force
_controllers: list[ThreadpoolController] = []  # found once: the search takes 40 ms


def _controller() -> ThreadpoolController:
    if not _controllers:
        _controllers.append(ThreadpoolController())
    return _controllers[0]


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run BLAS and LAPACK on one thread inside the block.

    The fits are many small products and solves: OpenBLAS's threads only spin and wait on
    them, and on a machine whose cores are busy they make a 150-model Cholesky solve forty
    times slower and a resample product four times slower. Parallelism comes from fitting
    independent chunks on threads instead (`newton_bt`). Nested blocks cost nothing.
    """
    global _single_blas_depth
    if _single_blas_depth:
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        _single_blas_depth += 1
        try:
            yield
        finally:
            _single_blas_depth -= 1


def _gradient(
    counts: BatchPairMatrix,
    total: BatchModelVector,
    won: BatchModelVector,
    beta: BatchModelVector,
    prior: float,
) -> tuple[BatchModelVector, BatchPairMatrix, BatchModelVector | None]:
    """Gradient of the penalised log-likelihood per fit, with what `_curvature` needs.

    `counts` is -(wins + wins.T)/4, `total` the row sums of wins + wins.T and `won` those of
    wins, all fixed during a fit. The penalty -(sum beta)^2 / 2 pins mean(beta) to 0 and
    keeps minus the Hessian positive definite. The curvature is a separate step because a
    fit that has converged, or a step about to be halved, needs none. Written with in-place
    operations: these two functions are most of the bootstrap time.
    """
    # P(a beats b) = (1 + t) / 2 and P(1 - P) = (1 - t^2) / 4 with t = tanh((beta_a - beta_b) / 2)
    # = (e_a - e_b) / (e_a + e_b), e = exp(beta): M exponentials per fit instead of M^2
    # tanh calls (libm's tanh is not vectorised and was half of this function's time).
    # Shifting beta by its maximum keeps e in (0, 1] and t unchanged; the floor keeps e > 0
    # (no 0/0) for strengths 700 apart, which only a diverging fit without prior reaches.
    e = np.exp(np.maximum(beta - beta.max(axis=1, keepdims=True), -700.0))
    t = e[:, :, None] - e[:, None, :]
    t /= np.add(e[:, :, None], e[:, None, :])
    grad = won - 0.5 * total + 2.0 * np.einsum("bij,bij->bi", counts, t)
    d = None
    if prior > 0.0:
        # Prior against the average opponent: terms in u = beta - mean(beta), so its gradient
        # and curvature d are projected by P = I - 11'/M: P diag(d) P.
        u = beta - beta.mean(axis=1, keepdims=True)
        su = 0.5 * (1.0 + np.tanh(0.5 * u))
        r = prior * (1.0 - 2.0 * su)
        grad += r - r.mean(axis=1, keepdims=True)
        d = 2.0 * prior * su * (1.0 - su)  # minus the prior's curvature
    grad -= beta.sum(axis=1)[:, None]
    return grad, t, d


def _curvature(
    t: BatchPairMatrix, counts: BatchPairMatrix, d: BatchModelVector | None
) -> BatchPairMatrix:
    """Minus the Hessian per fit, formed in place of `t` from `_gradient`'s results."""
    m = t.shape[1]
    t *= t
    np.subtract(1.0, t, out=t)
    t *= counts  # minus the off-diagonal curvature
    diag = -t.sum(axis=2)
    shift = np.ones(t.shape[0])
    if d is not None:
        diag += d
        t -= d[:, :, None] / m
        t -= d[:, None, :] / m
        shift += d.sum(axis=1) / (m * m)
    t += shift[:, None, None]
    idx = np.arange(m)
    t[:, idx, idx] += diag
    return t


def _solve_spd(matrix: BatchPairMatrix, rhs: BatchModelVector) -> BatchModelVector:
    """Solve a batch of symmetric positive definite systems, each on its own (the result of
    one does not depend on the others in the batch, so chunking never changes a bit).

    numpy's batched solve (LU with partial pivoting, LAPACK's dgesv per matrix) is as quick
    here as a loop of LAPACK's Cholesky solve dposv from scipy, within 1e-16 of it, and spares
    the report importing scipy.linalg (with scipy's array layer, a third of a second). LU
    also solves the matrices that are not positive definite, which only a fit without prior
    can produce; a singular one is an error that says why.
    """
    try:
        out: BatchModelVector = np.linalg.solve(matrix, rhs[..., None])[..., 0].astype(
            np.float64, copy=False
        )
    except np.linalg.LinAlgError as err:
        raise ValueError(
            "Bradley-Terry fit is singular: with prior=0 every model needs comparisons "
            "and the comparison graph must be connected (in every resample too); "
            "use the default prior"
        ) from err
    return out


def shared_inverse(wins: PairMatrix, beta: ModelVector, prior: float) -> PairMatrix:
    """The inverse of minus the Hessian for score matrix `wins` at `beta` (see `newton_bt`)."""
    wins = np.asarray(wins, dtype=np.float64)[None]
    counts = wins + np.swapaxes(wins, 1, 2)
    total = counts.sum(axis=2)
    counts *= -0.25
    _, t, d = _gradient(counts, total, wins.sum(axis=2), np.asarray(beta)[None], prior)
    out: PairMatrix = np.linalg.inv(_curvature(t, counts, d)[0])
    return out


@dataclass(frozen=True)
class NewtonResult:
    """A batch of fits: log-strengths (B, M) with mean 0, and how each fit ended."""

    beta: BatchModelVector
    iterations: IntArray  # (B,)
    gradient_norm: FloatArray  # (B,)
    converged: BoolArray  # (B,)


def newton_bt(
    wins: BatchPairMatrix,
    prior: float = DEFAULT_PRIOR,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
    init: FloatArray | None = None,
    workers: int | None = None,
    first_step: PairMatrix | None = None,
    offset: BatchModelVector | None = None,
) -> NewtonResult:
    """Fit B Bradley-Terry models at once by Newton's method with step halving.

    `wins` is (B, M, M); `init` (M,) or (B, M) starts every fit (the point estimate is a good
    start for bootstrap fits). Each fit stops when its gradient norm is below `tol`. Fits are
    independent, so they run in chunks (small enough to stay in cache) on `workers` threads
    (default: up to 4 cores); the result does not depend on the chunking, bit for bit.
    `first_step` (M, M), the inverse of minus the Hessian at `init` of data close to every
    fit's (`shared_inverse`: the full data's, for jackknife fits that each leave out one
    task of many), takes each fit's first step in place of its own curvature and Cholesky
    solve; later steps are Newton's, so the fits end at the same optimum.
    `offset` (B, M) is added to each model's score in each fit: the share of its score that
    style differences explain, for the style-controlled fit (`style_fit.score_shift`); an
    offset of zeros gives the plain fit bit for bit.
    """
    if prior < 0.0:
        raise ValueError(f"prior must be >= 0, got {prior}")
    wins = np.asarray(wins, dtype=np.float64)
    n_fits, m, _ = wins.shape
    beta = np.zeros((n_fits, m))
    if init is not None:
        beta[:] = init
        _start_unseen_at_mean(wins, beta)
        beta -= beta.mean(axis=1, keepdims=True)
    iterations = np.zeros(n_fits, dtype=np.int64)
    grad_norm = np.full(n_fits, np.inf)
    n_workers = max(1, default_threads() if workers is None else workers)
    if workers is None and n_fits * m * m < CHUNK_ELEMENTS // 4:
        n_workers = 1  # too small to repay starting threads
    size = max(1, min(CHUNK_ELEMENTS // (m * m), -(-n_fits // n_workers)))
    chunks = [slice(k, min(k + size, n_fits)) for k in range(0, n_fits, size)]

    def run(part: slice) -> None:
        _newton_chunk(
            wins[part],
            beta[part],
            iterations[part],
            grad_norm[part],
            prior,
            tol,
            max_iter,
            first_step,
            None if offset is None else offset[part],
        )

    small = m < 64 and n_fits * m * m < CHUNK_ELEMENTS // 4  # BLAS stays on one thread
    with nullcontext() if small else single_threaded_blas():
        if n_workers == 1 or len(chunks) == 1:
            for part in chunks:
                run(part)
        else:
            with ThreadPoolExecutor(max_workers=n_workers) as pool:
                list(pool.map(run, chunks))
    return NewtonResult(beta, iterations, grad_norm, grad_norm < tol)


def _start_unseen_at_mean(wins: BatchPairMatrix, beta: BatchModelVector) -> None:
    """Start each model without comparisons in a fit at the mean of the models with some
    (0 when no model has any), in place.

    Only the prior moves such a model, and the prior's curvature vanishes far from the mean:
    Newton started 3 log-units out (the point estimate, for a jackknife fit that leaves out
    the only task) overshoots and diverges. At the mean, a fit of the prior alone is already
    at its optimum, 0."""
    unseen = (wins.sum(axis=2) + wins.sum(axis=1)) == 0.0
    if not unseen.any():
        return
    seen = ~unseen
    n_seen = seen.sum(axis=1)
    mean_seen = np.where(n_seen > 0, (beta * seen).sum(axis=1) / np.maximum(n_seen, 1), 0.0)
    beta[:] = np.where(unseen, mean_seen[:, None], beta)


def _rounding_floor(total: BatchModelVector) -> FloatArray:
    """Per fit, a gradient norm within reach of rounding: each model's gradient is a sum of M
    terms on the scale of its comparisons `total` (B, M), computed to about M machine epsilons
    of it, and the norm gathers M of them; times 64 for the tanh and the offsets. At 20
    models x 1,000 tasks (19,000 comparisons a model) it is 2.4e-8: a gradient that small
    leaves the log-strengths about 1e-11 from the optimum."""
    m = total.shape[1]
    out: FloatArray = 64.0 * m * np.finfo(np.float64).eps * np.sqrt((total * total).sum(axis=1))
    return out


def _newton_chunk(
    wins: BatchPairMatrix,
    beta: BatchModelVector,
    iterations: IntArray,
    grad_norm: FloatArray,
    prior: float,
    tol: float,
    max_iter: int,
    first_step: PairMatrix | None = None,
    offset: BatchModelVector | None = None,
) -> None:
    """Newton iterations on one chunk, writing into `beta`, `iterations` and `grad_norm`.

    A step is halved while it makes the gradient norm worse: the Newton direction always
    lowers |gradient|^2 for a small enough step, and the Hessian is negative definite.
    """
    counts = wins + np.swapaxes(wins, 1, 2)
    total = counts.sum(axis=2)
    counts *= -0.25  # exact: the products with it are the same bits as before
    won = wins.sum(axis=2)
    if offset is not None:
        won += offset
    grad, curv, d = _gradient(counts, total, won, beta, prior)
    norm = np.sqrt((grad * grad).sum(axis=1))
    grad_norm[:] = norm
    floor = _rounding_floor(total)
    active = np.flatnonzero(norm >= tol)
    if active.size < norm.size:
        counts, total, won, floor = counts[active], total[active], won[active], floor[active]
        grad, curv, norm = grad[active], curv[active], norm[active]
        d = None if d is None else d[active]
    if first_step is None:
        curv = _curvature(curv, counts, d)
    for _ in range(max_iter):
        if active.size == 0:
            break
        b = beta[active]
        if first_step is not None:
            step = grad @ first_step  # symmetric, so the same as first_step @ grad
            first_step = None
        else:
            step = _solve_spd(curv, grad)
        scale = np.ones(active.size)
        candidate = b + step
        candidate -= candidate.mean(axis=1, keepdims=True)
        new_grad, new_t, new_d = _gradient(counts, total, won, candidate, prior)
        new_norm = np.sqrt((new_grad * new_grad).sum(axis=1))
        for _halving in range(_MAX_HALVINGS):
            worse = np.flatnonzero((new_norm > norm) & (new_norm >= tol))
            if worse.size == 0:
                break
            scale[worse] *= 0.5
            retry = b[worse] + scale[worse, None] * step[worse]
            retry -= retry.mean(axis=1, keepdims=True)
            candidate[worse] = retry
            g, t, dw = _gradient(counts[worse], total[worse], won[worse], retry, prior)
            new_grad[worse], new_t[worse] = g, t
            if new_d is not None and dw is not None:
                new_d[worse] = dw
            new_norm[worse] = np.sqrt((g * g).sum(axis=1))
        beta[active] = candidate
        iterations[active] += 1
        grad_norm[active] = new_norm
        # A fit near the floor rounding leaves (`_rounding_floor`) whose step did not halve
        # its gradient has reached it: Newton's steps only stir the rounding from here, so it
        # stops, unconverged if above tol, rather than iterate (and halve) until max_iter.
        # At 20 models x 1,000 tasks, 4 style-controlled resamples stalled at 1.1e-9 against
        # a tol of 1e-9 and took 0.8 s that way, their results unchanged to the last bit.
        stalled = (new_norm >= 0.5 * norm) & (new_norm < floor) & (new_norm >= tol)
        keep = (new_norm >= tol) & ~stalled
        active = active[keep]
        if active.size == 0:
            break
        if active.size < keep.size:
            counts, total, won, floor = counts[keep], total[keep], won[keep], floor[keep]
            new_grad, new_t, new_norm = new_grad[keep], new_t[keep], new_norm[keep]
            new_d = None if new_d is None else new_d[keep]
        # Only the fits going on need a curvature.
        grad, curv, norm = new_grad, _curvature(new_t, counts, new_d), new_norm


@dataclass(frozen=True)
class BTFit:
    """One Bradley-Terry fit, every per-model figure indexed by model."""

    log_strength: ModelVector  # mean 0
    rating: ModelVector  # exp(log_strength), geometric mean 1
    expected_win_rate: ModelVector  # mean fitted P(win) against each other model
    raw_win_rate: ModelVector  # (wins + ties/2) / comparisons; NaN with none
    comparisons: IntArray  # comparisons each model took part in
    iterations: int
    gradient_norm: float
    converged: bool
    prior: float


def fit_bt_wins(
    wins: PairMatrix,
    prior: float = DEFAULT_PRIOR,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> BTFit:
    """Fit one score matrix ([a, b] = score of a against b)."""
    wins = np.asarray(wins, dtype=np.float64)
    res = newton_bt(wins[None], prior=prior, tol=tol, max_iter=max_iter)
    beta = res.beta[0]
    counts = (wins + wins.T).sum(axis=1)
    return BTFit(
        log_strength=beta,
        rating=np.exp(beta),
        expected_win_rate=expected_win_rate(beta),
        raw_win_rate=raw_win_rate(wins),
        comparisons=np.rint(counts).astype(np.int64),
        iterations=int(res.iterations[0]),
        gradient_norm=float(res.gradient_norm[0]),
        converged=bool(res.converged[0]),
        prior=prior,
    )


def fit_bt(
    comp: Comparisons,
    prior: float = DEFAULT_PRIOR,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> BTFit:
    """Fit Bradley-Terry to pair outcomes (ties half a win, weak prior unless `prior=0`)."""
    return fit_bt_wins(win_matrix(comp), prior=prior, tol=tol, max_iter=max_iter)
