"""Simulated fields with a length-biased judge, to check style control against a known truth.

Every pair meets once per task. Each answer's length is drawn from its model's verbosity
(log-normal: weaker models write longer by default, so length flatters the wrong models) and
the pair's normalised length difference x = (a - b) / (a + b) is what style control sees.
People prefer the better model whatever the length: P(i beats j) = sigmoid(beta_i - beta_j),
so people's ranking is beta itself. The judge adds a taste for length:
P(i wins) = sigmoid(beta_i - beta_j + coefficient * x), with ties in `tie_rate` of pairs.
The plain Bradley-Terry fit of the judge converges to a ranking distorted toward verbose
models; the style-controlled fit to beta, and its coefficient to `coefficient` (without ties;
ties shrink every effect toward 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import Comparisons, FloatArray, ModelVector, comparisons, expected_win_rate
from .gate import gate
from .resample import DEFAULT_RESAMPLES, bootstrap
from .style_boot import style_bootstrap
from .style_features import normalised_difference
from .style_fit import style_data


@dataclass(frozen=True)
class LengthBiasedField:
    """One simulated run: the judge's outcomes, the pairs' length differences, people's truth."""

    comp: Comparisons
    covariates: FloatArray  # (C, 1) normalised length differences, i's answer minus j's
    people_log_strength: ModelVector  # mean 0
    people_win_rate: ModelVector
    coefficient: float


def simulate_length_biased_field(
    n_models: int,
    n_tasks: int,
    coefficient: float,
    seed: int | np.random.Generator = 0,
    strength: npt.ArrayLike | None = None,
    spread: float = 1.0,
    verbosity: npt.ArrayLike | None = None,
    length_sd: float = 0.4,
    tie_rate: float = 0.0,
) -> LengthBiasedField:
    """Draw a field and a judge whose log-odds rise by `coefficient` per unit of normalised
    length difference. `verbosity` (log-length offsets per model) defaults to -beta / 2."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if strength is None:
        beta = np.linspace(spread / 2, -spread / 2, n_models)
    else:
        beta = np.asarray(strength, dtype=np.float64)
    beta = beta - beta.mean()
    verbose = -0.5 * beta if verbosity is None else np.asarray(verbosity, dtype=np.float64)
    lengths = np.rint(200.0 * np.exp(verbose[None, :]
                                     + rng.normal(0.0, length_sd, (n_tasks, n_models))))
    a, b = np.triu_indices(n_models, k=1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    x = normalised_difference(lengths[task, i], lengths[task, j])
    p = 0.5 * (1.0 + np.tanh(0.5 * (beta[i] - beta[j] + coefficient * x)))
    score = (rng.random(task.size) < p).astype(np.float64)
    if tie_rate > 0.0:
        score[rng.random(task.size) < tie_rate] = 0.5
    comp = comparisons(task, i, j, score, n_models, n_tasks)
    return LengthBiasedField(comp, x[:, None], beta, expected_win_rate(beta), coefficient)


@dataclass(frozen=True)
class StyleCoverage:
    """Over many fields: how often each ranking's 95% win-rate intervals hold people's win
    rates, how often the coefficient's interval holds the judge's true taste, and how often
    style control changed the supported claims."""

    n_fields: int
    plain_coverage: float  # share of (field, model) intervals holding people's win rate
    controlled_coverage: float
    plain_all_covered: float  # share of fields where every model's interval holds it
    controlled_all_covered: float
    coefficient_coverage: float
    mean_coefficient: float
    claims_changed: float  # share of fields whose claims differ between the two rankings
    # the same share between the plain ranking and itself on other resamples (another
    # bootstrap seed): the noise floor of claims at pairs on the edge of significance
    claims_reseeded: float
    claims_gained: int  # claims of the style-controlled ranking the plain one lacks, all fields
    claims_lost: int  # and the other way round
    # the share of fields whose claims differ between the plain ranking and the style-controlled
    # one fitted with every covariate 0 (None unless asked for; it must be 0: the two share
    # resamples, so with nothing to take out nothing may differ)
    claims_zeroed: float | None
    plain_false_claims: int  # claims against people's order, over all fields
    controlled_false_claims: int
    plain_claims: int
    controlled_claims: int

    @property
    def controlled_coverage_se(self) -> float:
        p = self.controlled_coverage
        return float(np.sqrt(p * (1.0 - p) / max(1, self.n_fields)))


def _covers(low: FloatArray, high: FloatArray, truth: FloatArray) -> npt.NDArray[np.bool_]:
    out: npt.NDArray[np.bool_] = (low <= truth) & (truth <= high)
    return out


def style_coverage_study(
    n_fields: int,
    n_models: int,
    n_tasks: int,
    coefficient: float,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    strength: npt.ArrayLike | None = None,
    spread: float = 1.0,
    tie_rate: float = 0.0,
    verbosity_slope: float = 0.5,
    zero_control: bool = False,
) -> StyleCoverage:
    """Simulate `n_fields` runs and fit both rankings to each (the report's intervals and
    gate; both with the same bootstrap seed, so on the same resamples, as the report does).
    Each model's log-length offset is -verbosity_slope * beta (0: length unrelated to
    quality). With `zero_control`, also fit the style-controlled ranking with every
    covariate 0 and count the fields where its claims are not the plain ranking's."""
    rng = np.random.default_rng([seed, 27])
    plain_hits = controlled_hits = plain_all = controlled_all = coef_hits = changed = 0
    reseeded_changed = gained = lost = zeroed = 0
    plain_false = controlled_false = plain_claims = controlled_claims = 0
    coefficients = []
    for field_number in range(n_fields):
        beta = (np.linspace(spread / 2, -spread / 2, n_models) if strength is None
                else np.asarray(strength, dtype=np.float64))
        field = simulate_length_biased_field(
            n_models, n_tasks, coefficient, rng, beta, spread,
            verbosity=-verbosity_slope * (beta - beta.mean()), tie_rate=tie_rate,
        )
        truth = field.people_win_rate
        plain = bootstrap(field.comp, n_resamples=resamples, seed=field_number)
        reseeded = bootstrap(field.comp, n_resamples=resamples, seed=field_number + n_fields)
        styled = style_bootstrap(style_data(field.comp, field.covariates),
                                 n_resamples=resamples, seed=field_number)
        gated = [gate(boot, field.comp) for boot in (plain, styled.bootstrap)]
        plain_iv = gated[0].intervals["expected_win_rate"]
        styled_iv = gated[1].intervals["expected_win_rate"]
        hit_plain = _covers(plain_iv.lower, plain_iv.upper, truth)
        hit_styled = _covers(styled_iv.lower, styled_iv.upper, truth)
        plain_hits += int(hit_plain.sum())
        controlled_hits += int(hit_styled.sum())
        plain_all += bool(hit_plain.all())
        controlled_all += bool(hit_styled.all())
        coef_iv = styled.coefficient_intervals()
        coef_hits += bool(coef_iv.lower[0] <= coefficient <= coef_iv.upper[0])
        coefficients.append(float(styled.style.coefficients[0]))
        claims = [{(c.upper, c.lower) for c in g.ranking.claims} for g in gated]
        changed += claims[0] != claims[1]
        gained += len(claims[1] - claims[0])
        lost += len(claims[0] - claims[1])
        if zero_control:
            blank = style_bootstrap(style_data(field.comp, np.zeros_like(field.covariates)),
                                    n_resamples=resamples, seed=field_number)
            zeroed += claims[0] != {(c.upper, c.lower)
                                    for c in gate(blank.bootstrap, field.comp).ranking.claims}
        again = {(c.upper, c.lower) for c in gate(reseeded, field.comp).ranking.claims}
        reseeded_changed += claims[0] != again
        beta = field.people_log_strength
        plain_false += sum(beta[u] <= beta[v] for u, v in claims[0])
        controlled_false += sum(beta[u] <= beta[v] for u, v in claims[1])
        plain_claims += len(claims[0])
        controlled_claims += len(claims[1])
    cells = max(1, n_fields * n_models)
    fields = max(1, n_fields)
    return StyleCoverage(
        n_fields=n_fields,
        plain_coverage=plain_hits / cells,
        controlled_coverage=controlled_hits / cells,
        plain_all_covered=plain_all / fields,
        controlled_all_covered=controlled_all / fields,
        coefficient_coverage=coef_hits / fields,
        mean_coefficient=float(np.mean(coefficients)) if coefficients else float("nan"),
        claims_changed=changed / fields,
        claims_reseeded=reseeded_changed / fields,
        claims_gained=gained,
        claims_lost=lost,
        claims_zeroed=zeroed / fields if zero_control else None,
        plain_false_claims=plain_false,
        controlled_false_claims=controlled_false,
        plain_claims=plain_claims,
        controlled_claims=controlled_claims,
    )
