"""What a cascade saves against the strong judge alone, on a simulated field; prints figures.

    python benchmarks/bench_cascade.py                 # 6 models on the support suite
    python benchmarks/bench_cascade.py --models 4 --labels 60 --accept-at 0.85

Offline (the `sim/` providers through litellm): the models answer, a simulated person labels
the label plan's sample, the cascade runs (first pass `sim-judge/quick` on every pair in both
orders, the strong judge on the escalated pairs and the labelled ones), then the strong judge
alone judges every pair. Printed: calls, strong-judge calls and cost of each (at the prices
below, per million tokens in/out), and agreement of each with the simulated person on the
same labels, with Wilson 95% intervals. The cascade's figures are at its threshold: its strong
calls are the escalated pairs' (the labelled pairs it also judges are the measurement's price,
counted apart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STRONG = "sim-judge/strong:accuracy=0.85,position_bias=0.6,tie_rate=0.1"
FIRST_PASS = "sim-judge/quick"
PRICES = {
    STRONG: {"input_per_million": 3.0, "output_per_million": 15.0},
    FIRST_PASS: {"input_per_million": 0.15, "output_per_million": 0.6},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=6)
    parser.add_argument("--labels", type=int, default=120)
    parser.add_argument("--accept-at", type=float, default=0.8)
    parser.add_argument("--suite", default="suites/support_replies.yaml")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        (Path(scratch) / "suites").mkdir()
        shutil.copy(REPO / args.suite, Path(scratch) / "suites" / "bench.yaml")
        strengths = [round(2.0 - 4.0 * k / max(1, args.models - 1), 2) for k in range(args.models)]
        run = {
            "name": "bench",
            "suite": "suites/bench.yaml",
            "models": [f"sim/m{k}:strength={s}" for k, s in enumerate(strengths)],
            "judges": [STRONG],
            "cascade": {"first_pass": FIRST_PASS, "accept_at": args.accept_at},
            "prices": PRICES,
            "label_plan": {
                "n": args.labels,
                "simulated_labellers": [{"name": "sim-person", "accuracy": 0.9}],
            },
        }
        Path("runs.json").write_text(json.dumps({"runs": [run]}))
        measure(args.accept_at)


def measure(accept_at: float) -> None:
    from konkord.configuration.runspec import resolve_run
    from konkord.evidence.log import EvidenceLog
    from konkord.providers.llm import ModelClient
    from konkord.stages.current import answer_shas, current_labels, good_answers
    from konkord.stages.decisions_of import decisions_of
    from konkord.stages.judge.cascade import cascade_run
    from konkord.stages.judge.cascade_report import cascade_block
    from konkord.stages.judge.cascade_view import plan_of
    from konkord.stages.judge.judge import judge_run
    from konkord.stages.label.simulated import simulate_plan_labels
    from konkord.stages.run import generate_answers

    spec = resolve_run("bench")
    log = EvidenceLog(spec.run_dir)
    client = ModelClient(cache_dir=None, prices=spec.prices)
    asyncio.run(generate_answers(log, spec.suite, spec.models, spec.settings, client))
    simulate_plan_labels(spec)
    plan = plan_of(spec)
    assert plan is not None
    started = time.perf_counter()
    asyncio.run(cascade_run(spec, plan, client))
    cascade_s = time.perf_counter() - started
    made = sum(1 for r in log.records("verdicts") if r["judge"] == STRONG)
    started = time.perf_counter()
    asyncio.run(judge_run(spec, [STRONG], client))
    strong_s = time.perf_counter() - started
    shas = answer_shas(good_answers(spec, log))
    decisions = decisions_of(spec, log, shas, current_labels(log))
    block = cascade_block(decisions, spec.prices, spec.name)
    assert block.cascade is not None and block.strong_alone is not None

    def agreement(p: object) -> str:
        k, n, low, high = (getattr(p, a) for a in ("k", "n", "low", "high"))
        return f"{100 * k / n:.1f}% [{100 * low:.1f}, {100 * high:.1f}] ({k}/{n})"

    pairs = block.pairs
    print(
        f"field: {len(spec.models)} models x {len(spec.suite.tasks)} tasks = {pairs} pairs; "
        f"accept at {accept_at}; {block.labels} simulated labels (accuracy 0.9)"
    )
    print(
        f"first pass decided {block.decided_first_pass} of {pairs} pairs "
        f"({block.decided_first_pass / pairs:.0%}), escalated {block.decided_strong}"
    )
    for name, side in (("strong alone", block.strong_alone), ("cascade", block.cascade)):
        cost = "unknown" if side.cost_usd is None else f"${side.cost_usd:.4f}"
        print(
            f"  {name:<12} calls {side.calls:5d}  strong calls {side.strong_calls:5d}  "
            f"cost {cost:>9}  agreement with people {agreement(side.agreement)}"
        )
    saved = block.saved_cost_usd
    alone = block.strong_alone.cost_usd
    if saved is not None and alone:
        print(
            f"  saving: {block.saved_strong_calls} strong calls "
            f"({block.saved_strong_calls / block.strong_alone.strong_calls:.0%}), "
            f"${saved:.4f} ({saved / alone:.0%} of the strong judge alone)"
        )
    print(
        f"  strong calls the cascade made, labelled pairs included: {made} "
        f"(wall {cascade_s:.1f} s; the strong judge alone on the rest: {strong_s:.1f} s)"
    )
    print("  selective accuracy (accept at: decided, agreement on decided):")
    for row in block.selective:
        rate = row.agreement.rate
        print(
            f"    {row.threshold:.2f}: {row.decided.k:4d}/{row.decided.n} decided, "
            + ("n/a" if rate is None else f"{100 * rate:.0f}% of {row.agreement.n} labels")
        )


if __name__ == "__main__":
    main()
