"""The method sentences and figure captions of a judge block, written from what ran.

The methodology page and the captions print these and nothing hard-coded, so a change of
interval method, resample count or coding shows up in the words as well as in the numbers.
"""

from __future__ import annotations

from konkord.results import schema as R

LEVEL = 95


def _interval_name(boot: R.BootstrapInfo) -> str:
    if boot.method == "expanded BCa":
        return (
            "expanded BCa (bias-corrected and accelerated percentiles, taken at the level whose "
            "normal quantile is sqrt(n/(n-1)) t(n-1) for n resampled units, so that few tasks "
            "do not give too narrow an interval)"
        )
    return boot.method


def family_bar(boot: R.BootstrapInfo) -> str:
    """The claim's bar in words: the pair's interval widened to hold every claim together
    (a file written before that rule: the pair's own interval)."""
    if not boot.family_factors:
        return f"the {LEVEL}% {boot.method} interval of their difference excludes 0"
    return (
        f"the {LEVEL}% {boot.method} interval of their difference, widened "
        f"{boot.family_factors[-1]:.2f}-fold so that the chance of any wrong claim in the "
        f"ranking stays at most {100 - LEVEL}%, excludes 0"
    )


def captions(block: R.JudgeBlock, n_tasks: int) -> dict[str, str]:
    """Captions of the leaderboard table, the forest plot and the pairwise grid."""
    boot = block.bootstrap
    n = len(block.ratings)
    unit = "task" if boot.unit == "task" else "judgment"
    judged = f"{judged_share(block.design)} " if block.design is not None else ""
    return {
        "rank": (
            f"{judged}Rank range: best = 1 + the number of models the data places above it, worst = "
            f"{n} - the number it places below it. A model is placed above "
            f"another when {family_bar(boot)} "
            f"and an exact sign test over the {n_tasks} tasks agrees "
            f"(p <= {1 - LEVEL / 100:.2f}). Neighbouring rows share a shade when their ranges "
            "are the same."
        ),
        "forest": (
            "Expected win rate against the field: the chance of beating a randomly chosen other "
            f"model, with its {LEVEL}% {unit}-bootstrap {boot.method} interval, never narrower "
            "than the Wald interval of the Bradley-Terry fit. The dashed line is 50%."
        ),
        "heatmap": (
            f"Share of the same {boot.resamples} {unit} resamples in which the row model is "
            "rated above the column model; an outlined cell is an ordering the data supports. "
            f"The two differ in method: support needs the {boot.method} interval of the "
            "difference (not the raw share) to exclude 0"
            + (
                f", widened {boot.family_factors[-1]:.2f}-fold for the ranking's claims together,"
                if boot.family_factors
                else ""
            )
            + " and the sign test over tasks to pass, "
            f"so a share above {100 - (100 - LEVEL) / 2:g}% is not by itself a claim. Columns "
            "are numbered as the rows."
        ),
    }


def _calibration_sentences(cal: R.Calibration) -> list[str]:
    if cal.status != "calibrated" or cal.agreement is None:
        return [
            "No person's labels are matched with this judge's verdicts, so it is uncalibrated: "
            "no agreement figure is shown, never 0% or 100%."
        ]
    out = [
        f"Agreement with people: {cal.labels} labels by {len(cal.labellers)} labellers; each "
        "label beside the judge's verdict on the same item is one comparison. Its "
        f"{LEVEL}% interval is a Wilson interval on the effective sample size: the comparisons "
        f"of one task are not independent, so n is divided by the design effect measured over "
        f"the {cal.agreement.clusters or 0} tasks (cluster-robust variance, never below 1). "
        "The plain Wilson interval, which treats every comparison as independent, is printed "
        "beside it where a published table is reproduced.",
        "Cohen's kappa is computed with every comparison counted in both orientations (model "
        "a and model b swapped), so it does not depend on how the models are named; between "
        "two people, also in both rater orders, so it does not depend on their ids. Its "
        f"{LEVEL}% interval is the 2.5th to 97.5th percentile of a bootstrap over tasks.",
    ]
    return out


def _claim_rule(boot: R.BootstrapInfo) -> str:
    """The claim rule's bar for the methodology, with the step-down spelled out."""
    if not boot.family_factors:
        return f"the {LEVEL}% interval of the difference in log-strength excludes 0"
    steps = ", ".join(f"{f:.2f}" for f in boot.family_factors)
    return (
        f"the {LEVEL}% interval of the difference in log-strength excludes 0 after widening "
        "about its estimate by a factor that keeps the chance of any wrong claim in the whole "
        f"ranking at most {100 - LEVEL}% (a step-down on the bootstrap: the factor is the "
        f"{LEVEL}th percentile, over the resamples, of the largest excursion of any pair not "
        "yet claimed, each measured against its own interval; claimed pairs leave and the "
        f"factor is found again, until nothing new is claimed; here {steps}; with two models "
        "it is 1)"
    )


def method_sentences(block: R.JudgeBlock, n_tasks: int) -> list[str]:
    """Every method statement for one judge block, generated from the block itself."""
    boot = block.bootstrap
    unit = "tasks" if boot.unit == "task" else "single judgments"
    out = [
        f"Ratings: Bradley-Terry fitted to each pair's combined verdict over both orders (a tie "
        f"or a flipped pair counts half a win), with {LEVEL}% intervals from {boot.resamples} "
        f"bootstrap resamples of {unit} (seed {boot.seed}), {_interval_name(boot)}.",
        "No interval is narrower than the raw counts allow: the raw win rate's interval "
        "contains the Wilson interval of the model's score over its comparisons; log-strength, "
        "difference and expected-win-rate intervals contain the Wald interval of the "
        "Bradley-Terry fit (comparisons taken as independent, other models held at their "
        "estimates).",
    ]
    if boot.fits is not None and boot.converged is not None:
        out.append(f"{boot.converged} of {boot.fits} resample and jackknife fits converged.")
    if boot.disconnected_resamples is not None:
        handling = boot.disconnected_handling or "kept"
        out.append(
            f"{boot.disconnected_resamples} of {boot.resamples} resamples drew tasks that leave "
            f"the comparison graph in parts; they are {handling}."
        )
    out.append(
        f"An ordering is claimed when {_claim_rule(boot)} and an exact two-sided sign test "
        f"over the tasks, of which model scored higher on each, gives p <= "
        f"{1 - LEVEL / 100:.2f} (which needs at least 6 tasks even when all go one way). "
        "Where two such orderings would imply a third that is not supported (a above c, c above "
        "b, but not a above b), both are withdrawn, so the claims form one consistent order. "
        "Each model's rank range runs from 1 + the models placed above it to N - the models "
        "placed below it."
    )
    if boot.family_factors:
        out.append(
            f"The intervals shown are each pair's own {LEVEL}% ones: a pair whose interval "
            "excludes 0 but not once widened is not claimed, and its line says so."
        )
    out.append(
        "Tasks needed to separate two models scale the present interval as 1/sqrt(tasks) with "
        f"the same critical value as the {boot.method} interval"
        + (
            f", widened {boot.family_factors[-1]:.2f}-fold as the claims are"
            if boot.family_factors
            else ""
        )
        + ", for 80% odds; they are printed to two significant figures, and past 10,000 only "
        "as more than 10,000."
    )
    positional = block.diagnostics.positional
    if not positional.measurable:
        out.append(
            f"The shown-first share is not measurable here: {positional.not_measurable_why}."
        )
    out.extend(design_sentences(block.design))
    out.extend(_calibration_sentences(block.calibration))
    return out


def judged_share(design: R.DesignInfo) -> str:
    """How many of all possible comparisons were judged, for every leaderboard."""
    share = 100 * design.judged / max(1, design.possible)
    return (
        f"Judged {design.judged:,} of {design.possible:,} possible comparisons (every pair of "
        f"models on every task): {share:.0f}%."
    )


def design_sentences(design: R.DesignInfo | None) -> list[str]:
    """The pair design in words: which comparisons were paid for, and for adaptive designs
    how the rounds chose them and why they stopped."""
    if design is None:
        return []
    out = [f"Pair design: {design.label}. {judged_share(design)}"]
    if design.label.startswith("random"):
        out.append(
            "Each task judged the same number of pairs, drawn so that every model appears about "
            "equally often and every model is linked to every other (a connected design is all "
            "Bradley-Terry needs); the intervals resample tasks as for a full design."
        )
    if design.label.startswith("adaptive"):
        out.append(
            f"A balanced random start, then {design.rounds} round(s): after each, the ranking "
            "above (same fit, floors and sign test) was fitted again, and the next round's "
            "comparisons went where they most raised the expected number of neighbouring "
            "models separated (neighbours, or models up to two ranks apart, as a route), among "
            "neighbours whose difference interval still contained 0 and that the remaining "
            "tasks could still separate, on tasks not yet judged for that pair. Two models that "
            "met different opponents are compared task by task allowing for the opponents "
            "each met. "
            + (f"It stopped because {design.stopped}. " if design.stopped else "")
            + "Every round's choice and reason is in the run's designs.jsonl. The intervals "
            "resample tasks as for a full design; benchmarks/bench_design.py measures their "
            "coverage under this allocation."
        )
    return out


def describe(block: R.JudgeBlock, n_tasks: int) -> None:
    """Fill a block's method sentences and captions (after its calibration is set)."""
    block.methods = method_sentences(block, n_tasks)
    block.captions = captions(block, n_tasks)
