"""Style control against a known truth, over many simulated fields (konkord.stats.style_sim).

Prints, for a judge that prefers longer answers by a known coefficient (weaker models writing
longer) and people who ignore length:
- how often the length coefficient's 95% interval holds its true value (aim: 93-97%);
- how often the style-controlled and the plain 95% intervals of win rate against the field
  hold people's win rates (aim: 93-97% controlled, below 60% plain);
and for an unbiased judge (coefficient 0): in how many fields style control changed any
supported claim (aim: no more than 5%), and the same coverage figures, once with weaker
models writing longer and once with length unrelated to quality. Beside the claims changed:
how many were gained and lost, how often the plain ranking's claims change with the
bootstrap seed alone (the Monte-Carlo floor at pairs on the edge of significance), and, as a
control, how often the style-controlled ranking fitted with every covariate 0 differs from
the plain one (it must never: the two share their resamples). Each figure comes with its
binomial standard error over the fields run. The report's own estimators are used, at the
report's default resample count: the plain task bootstrap and the style-controlled one, on
the same resamples, both through the floors and the sign test.

Run: python benchmarks/bench_style.py [--fields 400] [--models 6] [--tasks 100]
     [--coefficient 2] [--resamples 1000] [--seed 0] [--no-control]
"""

from __future__ import annotations

import argparse
import math
import time

from konkord.stats.resample import DEFAULT_RESAMPLES
from konkord.stats.style_sim import StyleCoverage, style_coverage_study


def _se(p: float, n: int) -> str:
    return f"± {100 * math.sqrt(max(p * (1 - p), 0.0) / max(1, n)):.1f}"


def report(name: str, study: StyleCoverage, seconds: float) -> None:
    n = study.n_fields
    print(f"{name}: {n} fields in {seconds:.0f} s")
    print(f"  coefficient interval holds the truth: {study.coefficient_coverage:6.1%} "
          f"{_se(study.coefficient_coverage, n)}  (mean estimate {study.mean_coefficient:+.2f})")
    print(f"  style-controlled intervals hold people's win rates: "
          f"{study.controlled_coverage:6.1%} {_se(study.controlled_coverage, n)} per model; "
          f"all models in {study.controlled_all_covered:.0%} of fields")
    print(f"  plain intervals hold people's win rates:            "
          f"{study.plain_coverage:6.1%} {_se(study.plain_coverage, n)} per model; "
          f"all models in {study.plain_all_covered:.0%} of fields")
    print(f"  fields whose supported claims changed with style control: "
          f"{study.claims_changed:.1%} {_se(study.claims_changed, n)}; the plain ranking's "
          f"own claims change with the bootstrap seed alone in {study.claims_reseeded:.1%} "
          f"{_se(study.claims_reseeded, n)}")
    print(f"    claims gained {study.claims_gained}, lost {study.claims_lost}"
          + ("" if study.claims_zeroed is None else
             f"; with every covariate 0 the claims differ in {study.claims_zeroed:.1%} of "
             "fields (control: must be 0)"))
    print(f"  claims against people's order: plain {study.plain_false_claims} of "
          f"{study.plain_claims}, style-controlled {study.controlled_false_claims} of "
          f"{study.controlled_claims}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=400)
    parser.add_argument("--models", type=int, default=6)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--coefficient", type=float, default=2.0)
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-control", action="store_true",
                        help="skip the fit with every covariate 0")
    args = parser.parse_args()
    print(f"{args.models} models (spread 1 logit) x {args.tasks} tasks, {args.resamples} "
          "task-bootstrap resamples per field; lengths log-normal (sd 0.4), weaker models "
          "longer unless said; (standard errors over fields)")
    for name, coefficient, slope in (
        (f"length-biased judge (coefficient {args.coefficient:g})", args.coefficient, 0.5),
        ("unbiased judge (coefficient 0), weaker models longer", 0.0, 0.5),
        ("unbiased judge (coefficient 0), length unrelated to quality", 0.0, 0.0),
    ):
        start = time.perf_counter()
        study = style_coverage_study(args.fields, args.models, args.tasks, coefficient,
                                     resamples=args.resamples, seed=args.seed,
                                     verbosity_slope=slope, zero_control=not args.no_control)
        report(name, study, time.perf_counter() - start)


if __name__ == "__main__":
    main()
