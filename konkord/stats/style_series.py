"""The style bootstrap's gradient passes for one covariate, by tanh's Taylor series: no pass
over the comparisons at all, to within 1e-12 of each residual.

A fit's gradient needs, per slot s (a pair of models) and fit b, the sum over tasks t of
w_bt (tanh(p_bs + g_b x_ts) - tanh(p_bs)), where p_bs is half the pair's log-strength gap,
g_b half the style coefficient, x_ts the covariate and w_bt the task's weight in the fit
(`style_gradients.walk` visits every cell of it, 380 million at 20 models x 1,000 tasks and
2,000 fits, each gradient pass). With one covariate the sum factors: tanh(p + h) is
sum_n a_n(p) h^n, so it is

    sum_{n >= 1} a_n(p_bs) g_b^n M_n[b, s],   M_n[b, s] = sum_t w_bt x_ts^n,

and the moments M_n depend on the fit's weights and the data only, not on its parameters:
they are taken once (one matrix product for the resamples; the jackknife's are the totals
less the task left out) and every pass after costs a few operations per (fit, slot).

The coefficients come from tanh' = 1 - tanh^2: a_0 = tanh(p), a_1 = 1 - a_0^2 and
(n + 1) a_{n+1} = -sum_{k=0..n} a_k a_{n-k}. The series is cut after N terms, where N
bounds what is left: tanh is analytic in the strip |Im z| < pi/2, and on a circle of radius
R < pi/2 about a real point |tanh| <= tan(R) (its largest value is at the circle's top), so
by Cauchy's estimate |a_n| <= tan(R) / R^n and the terms after the N-th sum to at most
tan(R) (rho/R)^(N+1) / (1 - rho/R) for |h| <= rho. A fit whose |g_b| max|x| is too large
for the moments taken is passed over the comparisons as before (`walk`), so the gradient
is never worse than that bound. Where every covariate is 0 the moments are 0 and so is the
style's share, exactly, as in the walk over the cells.

May import: numpy and the statistics' own types (`bt`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bt import FloatArray, IntArray

RADIUS = 1.2  # of the circle in Cauchy's estimate: below pi/2, where tanh has its poles
TANH_BOUND = math.tan(RADIUS)  # the largest |tanh| on such a circle about any real point
SERIES_ERROR = 1e-12  # the most any residual's series may leave out (float32 tanh: 1e-7)
MAX_ORDER = 24  # beyond this many moments a pass over the cells is as cheap
ROWS_AT_ONCE = 128  # fits whose series are summed together (their coefficients: 0.2 MB each)


def series_order(rho: float, error: float = SERIES_ERROR) -> int | None:
    """The fewest terms N that leave at most `error` of tanh(p + h) - tanh(p) for every real p
    and |h| <= rho; None where more than MAX_ORDER would be needed."""
    ratio = rho / RADIUS
    if ratio <= 0.0:
        return 1
    if ratio >= 0.5:
        return None
    terms = math.ceil(math.log(error * (1.0 - ratio) / TANH_BOUND) / math.log(ratio)) - 1
    order = max(1, terms)
    return order if order <= MAX_ORDER else None


def left_out(order: int, rho: Any) -> Any:
    """The bound on what the series cut after `order` terms leaves, for |h| <= rho (rho
    below RADIUS; a float, or an array of them)."""
    ratio = rho / RADIUS
    return TANH_BOUND * ratio ** (order + 1) / (1.0 - ratio)


def largest(x: FloatArray, mask: FloatArray) -> float:
    """The largest |x| of the cells `mask` keeps (0 where it keeps none)."""
    return float(np.abs(x[mask != 0]).max(initial=0.0))


@dataclass(frozen=True)
class Moments:
    """M_n[fit, s] = sum_t w_ft mask_ts x_ts^n for n = 1 .. order + 1, for the fits it was
    taken for: of the B resamples (fit b < B: weights (B, U)) and the U jackknife fits (fit
    B + k: every task but k), those that are passed over the data; `at` is each fit's row in
    `by_fit` (-1: none), `x_max` the largest |x| the moments were taken of."""

    by_fit: FloatArray  # (fits taken, order + 1, S)
    at: IntArray  # (B + U,)
    order: int
    x_max: float

    @classmethod
    def of(
        cls,
        x: FloatArray,
        mask: FloatArray,
        weights: FloatArray,
        order: int,
        fits: IntArray | None = None,
    ) -> Moments:
        """The moments of the covariate `x` (U, S) under `mask` (U, S), for the resamples'
        task weights (B, U) and the jackknife's: of `fits` only (default: all B + U). Every
        order in one matrix product (a third quicker than one product an order)."""
        n_resamples, n_units = weights.shape
        n_fits = n_resamples + n_units
        n_slots = x.shape[1]
        fits = np.arange(n_fits) if fits is None else np.asarray(fits, dtype=np.int64)
        boot, jack = fits[fits < n_resamples], fits[fits >= n_resamples] - n_resamples
        at = np.full(n_fits, -1, dtype=np.int64)
        at[np.concatenate([boot, jack + n_resamples])] = np.arange(boot.size + jack.size)
        powers = np.empty((n_units, order + 1, n_slots))  # mask x^n, n = 1 .. order + 1
        np.multiply(mask, x, out=powers[:, 0])
        for n in range(1, order + 1):
            np.multiply(powers[:, n - 1], x, out=powers[:, n])
        width = (order + 1) * n_slots
        flat = powers.reshape(n_units, width)
        by_fit = np.empty((boot.size + jack.size, order + 1, n_slots))
        np.matmul(weights[boot], flat, out=by_fit[: boot.size].reshape(boot.size, width))
        np.subtract(
            flat.sum(axis=0)[None], flat[jack], out=by_fit[boot.size :].reshape(jack.size, width)
        )
        return cls(by_fit, at, order, largest(x, mask))

    def serves(self, rows: IntArray, gamma_half: FloatArray) -> np.ndarray:
        """Which of the fits `rows`, at half-coefficients (n,), the moments serve to within
        SERIES_ERROR a residual: taken for them, and every |g x| within the series' reach."""
        reach = np.abs(gamma_half) * self.x_max
        safe = reach < 0.5 * RADIUS  # (as `series_order`: past half the radius, no series)
        bound = np.full(reach.shape, np.inf)
        bound[safe] = left_out(self.order, reach[safe])
        out: np.ndarray = (bound <= SERIES_ERROR) & (self.at[rows] >= 0)
        return out

    def diff_sums(
        self, rows: IntArray, pair_half: FloatArray, gamma_half: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """For fits `rows` at half log-strength gaps (n, S) and half coefficients (n,): the sum
        over tasks of w (tanh(p + g x) - tanh(p)) per slot (n, S), and of x times it (n,).
        Taken `ROWS_AT_ONCE` fits at a time, so that the series' coefficients stay small."""
        by_slot = np.empty(pair_half.shape)
        by_feature = np.empty(len(rows))
        for start in range(0, len(rows), ROWS_AT_ONCE):
            part = slice(start, start + ROWS_AT_ONCE)
            by_slot[part], by_feature[part] = self._diff_sums(
                rows[part], pair_half[part], gamma_half[part]
            )
        return by_slot, by_feature

    def _diff_sums(
        self, rows: IntArray, pair_half: FloatArray, gamma_half: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        order = self.order
        moments = self.by_fit[self.at[rows]]  # (n, order + 1, S)
        tanh = np.tanh(pair_half)
        coefficients = [tanh, 1.0 - tanh * tanh]
        for n in range(1, order):
            total = coefficients[0] * coefficients[n]
            for k in range(1, n + 1):
                total += coefficients[k] * coefficients[n - k]
            total *= -1.0 / (n + 1)
            coefficients.append(total)
        by_slot = np.zeros(pair_half.shape)
        by_feature = np.zeros(pair_half.shape)
        power = np.ones(len(rows))
        for n in range(1, order + 1):
            power = power * gamma_half
            term = coefficients[n] * power[:, None]
            by_slot += term * moments[:, n - 1]
            by_feature += term * moments[:, n]
        return by_slot, by_feature.sum(axis=1)
