"""The few special functions the statistics use: the logistic function, the normal
distribution function and its quantile, the Student t quantile and the binomial distribution
function, in numpy and the standard library.

scipy.special has them all, but importing it costs about 0.3 s of CPU (scipy 1.17 loads its
array-API layer, and with it numpy.f2py, numpy.ma and numpy.testing): a third of the imports of
`konkord report` at leaderboard scale, on its critical path, for five functions. The normal
functions and the logistic agree with scipy's to a few units in the last place (the normal
quantile is the standard library's, Wichura's AS 241); the t quantile, from the incomplete
beta function's continued fraction and Newton's method, agrees with 50-digit arithmetic to
2e-13 relative at 1 to 10^6 degrees of freedom and tail probabilities down to 1e-9; the
binomial tail at p = 1/2 (the sign test's) with exact sums to 1e-14 (scipy's is off by up to
5e-12 there). `tests/test_special.py` holds them to those references and to scipy.

May import: numpy and the standard library.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["bdtr", "expit", "ndtr", "ndtri", "stdtr", "stdtrit"]

_STANDARD = NormalDist()
_SQRT1_2 = math.sqrt(0.5)
# The continued fraction of the incomplete beta function: its terms are taken until the
# fraction moves by less than this (relative), or this many have been taken.
_CF_TOLERANCE = 1e-16
_CF_TERMS = 10_000
_TINY = 1e-300
# From this many degrees of freedom on, the t quantile is the normal one corrected by the
# Cornish-Fisher series to the fourth power of 1/df (Abramowitz and Stegun 26.7.5): its first
# omitted term is below 3e-16 of the quantile for tail probabilities down to 1e-9.
_LARGE_DF = 1e4
# Up to this many trials, a binomial tail at p = 1/2 takes its factor in front, (n - k) C(n, k)
# / 2^(n + 1), in whole numbers: by logs of gamma functions it is off by about 1e-12.
_EXACT_TRIALS = 100_000


def _elementwise(scalar: Any, *args: Any) -> Any:
    """`scalar` applied element by element, a float for scalars and a float array for arrays
    (these functions are called on a handful of values, or on one per pair of models)."""
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in args))
    if arrays[0].ndim == 0:
        return np.float64(scalar(*(float(a) for a in arrays)))
    out = np.empty(arrays[0].shape)
    flat = out.reshape(-1)
    for k, values in enumerate(zip(*(a.reshape(-1).tolist() for a in arrays), strict=True)):
        flat[k] = scalar(*values)
    return out


def expit(x: npt.ArrayLike) -> Any:
    """The logistic function 1 / (1 + exp(-x)), elementwise (0 where exp(-x) overflows)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def _ndtr(x: float) -> float:
    z = x * _SQRT1_2
    if abs(z) < _SQRT1_2:
        return 0.5 + 0.5 * math.erf(z)
    tail = 0.5 * math.erfc(abs(z))  # the smaller side, without cancellation
    return 1.0 - tail if z > 0 else tail


def ndtr(x: npt.ArrayLike) -> Any:
    """The standard normal distribution function, elementwise."""
    return _elementwise(_ndtr, x)


def _ndtri(p: float) -> float:
    if not 0.0 < p < 1.0:
        return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
    return _STANDARD.inv_cdf(p)


def ndtri(p: npt.ArrayLike) -> Any:
    """The standard normal quantile, elementwise (-inf at 0, inf at 1, NaN outside [0, 1])."""
    return _elementwise(_ndtri, p)


def _fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (its even and odd terms by the modified Lentz
    method), which converges fast where x < (a + 1) / (a + b + 2)."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    value = d
    for m in range(1, _CF_TERMS + 1):
        two_m = 2.0 * m
        for numerator in (
            m * (b - m) * x / ((a + two_m - 1.0) * (a + two_m)),
            -(a + m) * (a + b + m) * x / ((a + two_m) * (a + two_m + 1.0)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            step = c * d
            value *= step
        if abs(step - 1.0) < _CF_TOLERANCE:
            return value
    return value


def _betainc(
    a: float, b: float, x: float, rest: float | None = None, front: float | None = None
) -> float:
    """The regularised incomplete beta function I_x(a, b); `rest`, 1 - x, and `front`,
    x^a (1 - x)^b / B(a, b), where the caller has them more precisely than from x."""
    y = 1.0 - x if rest is None else rest
    if math.isnan(x) or math.isnan(y) or a <= 0.0 or b <= 0.0:
        return math.nan
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    if front is None:
        front = math.exp(
            a * math.log(x) + b * math.log(y)
            + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        )  # fmt: skip
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _fraction(a, b, x) / a
    return 1.0 - front * _fraction(b, a, y) / b


def _bdtr(k: float, n: float, p: float) -> float:
    if math.isnan(k) or math.isnan(n) or math.isnan(p) or not 0.0 <= p <= 1.0 or k < 0:
        return math.nan
    k, n = math.floor(k), math.floor(n)
    if k >= n:
        return 1.0
    if p == 0.0:
        return 1.0
    front = None
    if p == 0.5 and n <= _EXACT_TRIALS:  # a sign test's: its factor in front exactly, once rounded
        whole_k, whole_n = int(k), int(n)
        front = (whole_n - whole_k) * math.comb(whole_n, whole_k) / 2 ** (whole_n + 1)
    return _betainc(n - k, k + 1.0, 1.0 - p, p, front)


def bdtr(k: npt.ArrayLike, n: npt.ArrayLike, p: npt.ArrayLike) -> Any:
    """P(X <= k) for X binomial with `n` trials of probability `p`, elementwise (k and n
    rounded down, as scipy's)."""
    return _elementwise(_bdtr, k, n, p)


def _log_gamma_ratio(a: float) -> float:
    """log(Gamma(a + 1/2) / Gamma(a)), to rounding: by its asymptotic series from a = 25 on
    (the first term left out is below 1e-18 there), exactly where 2a is a smaller whole
    number. The difference of two `lgamma`s near a * log(a) loses about 1e-12 at a thousand
    degrees of freedom, which the t quantile would carry."""
    if a >= 25.0:
        inverse = 1.0 / a
        square = inverse * inverse
        series = inverse * (-1.0 / 8.0 + square * (1.0 / 192.0 + square * (
            -1.0 / 640.0 + square * 17.0 / 14336.0)))  # fmt: skip
        return 0.5 * math.log(a) + series
    twice = 2.0 * a
    if twice == math.floor(twice) and twice >= 1.0:
        n = int(a)
        central = math.comb(2 * n, n) / 4**n  # C(2n, n) / 4^n, rounded once
        if twice % 2.0 == 0.0:  # Gamma(n + 1/2) / Gamma(n) = sqrt(pi) n C(2n, n) / 4^n
            return 0.5 * math.log(math.pi) + math.log(n * central)
        return -0.5 * math.log(math.pi) - math.log(central)  # a = n + 1/2
    return math.lgamma(a + 0.5) - math.lgamma(a)


def _upper_t(t: float, df: float) -> float:
    """P(T > t) for t >= 0 and Student's T with `df` degrees of freedom: half of
    I_x(df/2, 1/2) at x = df / (df + t^2), its factor in front taken by logs without
    rounding x first."""
    if t == 0.0:
        return 0.5
    a = 0.5 * df
    square = t * t
    x, rest = df / (df + square), square / (df + square)
    log_front = (
        -a * math.log1p(square / df)
        + 0.5 * (2.0 * math.log(t) - math.log(df + square))
        + _log_gamma_ratio(a)
        - 0.5 * math.log(math.pi)
    )
    return 0.5 * _betainc(a, 0.5, x, rest, math.exp(log_front))


def _stdtr(df: float, t: float) -> float:
    if math.isnan(df) or math.isnan(t) or df <= 0.0:
        return math.nan
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    upper = _upper_t(abs(t), df)
    return 1.0 - upper if t > 0 else upper


def stdtr(df: npt.ArrayLike, t: npt.ArrayLike) -> Any:
    """Student's t distribution function with `df` degrees of freedom, elementwise."""
    return _elementwise(_stdtr, df, t)


def _t_density(t: float, df: float) -> float:
    log_scale = _log_gamma_ratio(0.5 * df) - 0.5 * math.log(df * math.pi)
    return math.exp(log_scale - 0.5 * (df + 1.0) * math.log1p(t * t / df))


def _cornish_fisher(z: float, df: float) -> float:
    """The t quantile from the normal one, to the fourth power of 1/df (A&S 26.7.5)."""
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


@functools.lru_cache(maxsize=4096)  # the planner asks again and again at the same counts
def _stdtrit(df: float, p: float) -> float:
    if math.isnan(df) or math.isnan(p) or df <= 0.0 or not 0.0 <= p <= 1.0:
        return math.nan
    if p == 0.0 or p == 1.0:
        return -math.inf if p == 0.0 else math.inf
    if p < 0.5:
        return -_stdtrit(df, 1.0 - p) if p > 0.25 else -_upper_quantile(df, p)
    return _upper_quantile(df, 1.0 - p) if p > 0.75 else _central_quantile(df, p)


def _upper_quantile(df: float, tail: float) -> float:
    """The t with P(T > t) = `tail` (at most a quarter): Newton's method on the log of the
    tail against the log of t (where a heavy tail is a straight line), from the
    Cornish-Fisher value, or closed forms at one and two degrees of freedom."""
    if df == 1.0:
        return 1.0 / math.tan(math.pi * tail)
    if df == 2.0:
        return (1.0 - 2.0 * tail) / math.sqrt(2.0 * tail * (1.0 - tail))
    start = _cornish_fisher(-_ndtri(tail), df)
    if df >= _LARGE_DF:
        return start
    log_t = math.log(max(start, 0.1))
    log_tail = math.log(tail)
    last = math.inf
    for n in range(200):
        t = math.exp(log_t)
        upper = _upper_t(t, df)
        if upper <= 0.0:  # past the range of doubles: step back towards the body
            log_t -= 1.0
            continue
        step = (math.log(upper) - log_tail) * upper / (_t_density(t, df) * t)
        log_t += max(-2.0, min(2.0, step))
        # Newton's error is about the square of its step: below 1e-8, one more is rounding.
        if abs(step) <= 1e-8 or (n >= 3 and abs(step) >= last):
            break
        last = abs(step)
    return math.exp(log_t)


def _central_quantile(df: float, p: float) -> float:
    """The t with P(T <= t) = p for p in [1/2, 3/4]: Newton's method on the distribution."""
    if df == 1.0:
        return math.tan(math.pi * (p - 0.5))
    t = _cornish_fisher(_ndtri(p), df)
    if df >= _LARGE_DF:
        return t
    last = math.inf
    for _ in range(100):
        step = (_stdtr(df, t) - p) / _t_density(t, df)
        t -= step
        if abs(step) <= 1e-8 * max(abs(t), 1e-300) or abs(step) >= last:  # as above
            break
        last = abs(step)
    return t


def stdtrit(df: npt.ArrayLike, p: npt.ArrayLike) -> Any:
    """The Student t quantile: the t with P(T <= t) = p, `df` degrees of freedom, elementwise."""
    return _elementwise(_stdtrit, df, p)
