"""Plant plausible bugs one at a time and check that the named tests catch each (issue 25).

Each mutation replaces one exact piece of source text; the script first checks that the
tests pass without it, then applies it, runs the tests that should catch it, restores the
file whatever happens, and prints caught / MISSED. A mutation whose text is no longer found
is reported as stale (the code moved: update it), one whose tests fail unmutated as broken.
Do not edit the checkout while it runs: it rewrites source files for a moment.

Run by hand: `python benchmarks/bench_mutation.py [--only SUBSTRING] [--list]`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "families: openai peeled as a route after openrouter (vendor lost)",
        "konkord/providers/families.py",
        "    while len(segments) > 1 and segments[0] in ROUTING_PREFIXES and (\n"
        "        first or segments[0] != \"openai\"\n    ):",
        "    while len(segments) > 1 and segments[0] in ROUTING_PREFIXES:",
        ("tests/test_families.py",),
    ),
    Mutation(
        "judges: consensus match counts pairs with a model the judge never saw",
        "konkord/stats/judges.py",
        "    present = _present(wins) & _present(others)",
        "    present = _present(others)",
        ("tests/test_stats_judges.py",),
    ),
    Mutation(
        "floors: the Wald floor of a difference ignores the covariance",
        "konkord/stats/floors.py",
        "    pair_var = var[:, None] + var[None, :] - 2.0 * cov",
        "    pair_var = var[:, None] + var[None, :]",
        ("tests/test_stats_floors.py",),
    ),
    Mutation(
        "floors: the prior's curvature halved",
        "konkord/stats/floors.py",
        "np.diag(2.0 * prior * s * (1.0 - s))",
        "np.diag(prior * s * (1.0 - s))",
        ("tests/test_stats_floors.py",),
    ),
    Mutation(
        "cascade: with samples:N the winner mapped to the other model",
        "konkord/stages/judge/cascade.py",
        '"winner": "tie" if chosen == "tie" else shown[0 if chosen == "1" else 1],',
        '"winner": "tie" if chosen == "tie" else shown[1 if chosen == "1" else 0],',
        ("tests/test_cascade.py::test_samples_give_the_vote_share",),
    ),
    Mutation(
        "cascade_view: one strong order counted as decided",
        "konkord/stages/judge/cascade_view.py",
        'return "strong" if verdict is not None and verdict.complete else "pending"',
        'return "strong" if verdict is not None else "pending"',
        ("tests/test_cascade.py::test_an_escalated_pair_with_one_strong_order_is_pending_not_decided",),
    ),
    Mutation(
        "budget: a call of unknown cost counted as free",
        "konkord/providers/budget.py",
        "        self.spent_usd += held if cost is None else cost",
        "        self.spent_usd += 0.0 if cost is None else cost",
        ("tests/test_budget.py::test_a_call_of_unknown_cost_is_counted_at_its_hold_not_as_free",),
    ),
    Mutation(
        "budget: money already spent on verdicts not counted",
        "konkord/providers/budget.py",
        '    for stream in ("answers", "verdicts"):',
        '    for stream in ("answers",):',
        ("tests/test_budget.py",),
    ),
    Mutation(
        "stopping: the lock file moved into the run's evidence folder",
        "konkord/evidence/stopping.py",
        '    return run_dir.parent.parent / ".konkord" / "locks" / f"{run_dir.name}.lock"',
        '    return run_dir / "writer.lock"',
        ("tests/test_one_writer.py::test_the_writer_lock_lives_under_konkord_not_in_the_evidence",),
    ),
    Mutation(
        "atomic: a failed write leaves its temporary file",
        "konkord/evidence/atomic.py",
        "        tmp.unlink(missing_ok=True)\n",
        "        pass\n",
        ("tests/test_atomic_writes.py::test_a_failed_write_removes_its_temporary_file",),
    ),
    Mutation(
        "evidence: appends without fsync",
        "konkord/evidence/log.py",
        "                written += os.write(fd, payload[written:])\n            os.fsync(fd)\n",
        "                written += os.write(fd, payload[written:])\n",
        ("tests/test_evidence.py::test_an_append_is_fsynced_before_it_returns",),
    ),
    Mutation(
        "paths: containment by string prefix (../proj-evil inside proj)",
        "konkord/evidence/paths.py",
        "    if target != root and root not in target.parents:",
        "    if target != root and not str(target).startswith(str(root)):",
        ("tests/test_hostile_files.py::"
         "test_a_sibling_folder_sharing_the_projects_name_as_a_prefix_is_outside",),
    ),
    Mutation(
        "checks: an int subclass converted through its own __int__",
        "konkord/checks/plain.py",
        "    (int, int.__int__), (float, float.__float__),",
        "    (int, int), (float, float.__float__),",
        ("tests/test_check_forgery.py::test_a_rigged_int_crosses_as_its_true_value",),
    ),
    Mutation(
        "checks: the answer may set attributes on the tests' objects",
        "konkord/checks/wire.py",
        '                    self.trusted and (name.startswith("_") or op == "setattr")',
        '                    self.trusted and name.startswith("_")',
        ("tests/test_check_forgery.py::"
         "test_the_answer_cannot_set_attributes_on_the_tests_objects",),
    ),
    Mutation(
        "credentials: sk- strings in model answers redacted",
        "konkord/providers/llm.py",
        '        text = redact(message.content or "", key_shapes=False, secrets=self._secrets)',
        '        text = redact(message.content or "", key_shapes=True, secrets=self._secrets)',
        ("tests/test_key_never_written.py::test_key_shaped_strings_in_an_answer_are_kept_as_written",),
    ),
    Mutation(
        "check stage: no check record written",
        "konkord/stages/check.py",
        '            log.append("checks", _record(item, result, language, limits))\n',
        "",
        ("tests/test_check_stage.py::test_records_are_json_lines_with_the_documented_fields",),
    ),
    Mutation(
        "mutate: the candidates' order depends on the interpreter's hash seed",
        "konkord/sim/mutate.py",
        "    return out\n\n\ndef plausible_bug(",
        "    turn = hash('konkord') % max(1, len(out))\n    return out[turn:] + out[:turn]"
        "\n\n\ndef plausible_bug(",
        ("tests/test_example_suites.py::"
         "test_seeds_are_deterministic_and_cycle_through_the_candidates",),
    ),
    Mutation(
        "newton: unseen models keep their far start (prior-only fit diverges)",
        "konkord/stats/newton.py",
        "        _start_unseen_at_mean(wins, beta)\n",
        "",
        ("tests/test_one_task.py",),
    ),
    Mutation(
        "ranking: plan on the observed gap (no margin)",
        "konkord/stats/planning.py",
        "    planning = gap - planning_margin(power) * se_now",
        "    planning = gap",
        ("tests/test_stats_ranking.py",),
    ),
    Mutation(
        "ranking: no sign-test minimum on the planned tasks",
        "konkord/stats/planning.py",
        "    return planning, max(tasks, sign_test_min_tasks(level))",
        "    return planning, tasks",
        ("tests/test_stats_ranking.py",),
    ),
    Mutation(
        "consistency: fitted with the ranking's prior",
        "konkord/stats/diagnostics.py",
        "CONSISTENCY_PRIOR = 1e-3",
        "CONSISTENCY_PRIOR = 0.5",
        ("tests/test_stats_judges.py",),
    ),
    Mutation(
        "agreement: normal critical value at few tasks",
        "konkord/stats/agreement.py",
        "    return critical_value(level, n_clusters if n_clusters >= 2 else None)",
        "    return critical_value(level, None)",
        ("tests/test_few_task_coverage.py", "tests/test_kappa_naming.py"),
    ),
    Mutation(
        "kappa: plain percentile interval",
        "konkord/stats/agreement.py",
        "    low, high = few_cluster_kappa_interval(value, defined, per_cluster, counted)",
        "    low, high = np.percentile(defined, [2.5, 97.5])",
        ("tests/test_few_task_coverage.py", "tests/test_kappa_naming.py"),
    ),
    Mutation(
        "ppi: lambda tuning without centring the gradients",
        "konkord/stats/ppi.py",
        "    a -= a.mean(axis=0)\n    d -= d.mean(axis=0)\n",
        "",
        ("tests/test_stats_ppi.py",),
    ),
    Mutation(
        "jackknife_t: the leave-one-out spread taken as a sample's (no (K-1)/K, K times smaller)",
        "konkord/stats/jackknife_t.py",
        "np.sqrt((total - 1.0) / total * (w * (values - mean) ** 2).sum(axis=0))",
        "np.sqrt((w * (values - mean) ** 2).sum(axis=0) / (total * (total - 1.0)))",
        ("tests/test_stats_jackknife_t.py",),
    ),
    Mutation(
        "jackknife_t: the normal critical value in place of Student's t with K-1 df",
        "konkord/stats/jackknife_t.py",
        "    return float(stdtrit(max(units - 1.0, 1.0), 0.5 + level / 2.0))",
        "    return float(stdtrit(1e9, 0.5 + level / 2.0))",
        ("tests/test_stats_jackknife_t.py",),
    ),
    Mutation(
        "ppi: clipped resamples never counted",
        "konkord/stats/ppi.py",
        "    return int(moved.reshape(raw.shape[0], -1).any(axis=1).sum())",
        "    return 0",
        ("tests/test_stats_ppi.py",),
    ),
)


def tests_pass(tests: tuple[str, ...]) -> bool:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    return result.returncode == 0


def run(mutation: Mutation, baseline: dict[tuple[str, ...], bool]) -> str:
    """caught / MISSED; "stale" when the text to mutate is gone, "broken" when the tests
    fail without the mutation (a failure then would prove nothing)."""
    path = REPO / mutation.path
    original = path.read_text()
    if original.count(mutation.old) != 1:
        return "stale"
    if mutation.tests not in baseline:
        baseline[mutation.tests] = tests_pass(mutation.tests)
    if not baseline[mutation.tests]:
        return "broken"
    try:
        path.write_text(original.replace(mutation.old, mutation.new))
        passed = tests_pass(mutation.tests)
    finally:
        path.write_text(original)
    return "MISSED" if passed else "caught"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run mutations whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if args.only in m.name]
    if args.list:
        for m in chosen:
            print(f"{m.name}  ({m.path}; {', '.join(m.tests)})")
        return
    started = time.perf_counter()
    counts: dict[str, int] = {}
    baseline: dict[tuple[str, ...], bool] = {}
    for m in chosen:
        outcome = run(m, baseline)
        counts[outcome] = counts.get(outcome, 0) + 1
        print(f"{outcome:>7}  {m.name}", flush=True)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"\n{len(chosen)} mutations: {summary} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
