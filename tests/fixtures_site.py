"""Hand-made Results objects for the site's tests and benchmark: no stage is run to make them.

The numbers are coherent (ratings in rank order, P(above) matching the order) but invented;
what matters is that every field the site renders is present, including the awkward cases:
two judges, a calibrated and an uncalibrated block, a simulated run, and hostile answers.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import json
import math
import random
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from konkord.results.schema import (
    AnswerView,
    BootstrapInfo,
    Calibration,
    CheckView,
    Claim,
    ComparisonView,
    Confusion,
    CostLine,
    Coverage,
    Cycles,
    Diagnostics,
    Disagreement,
    FitInfo,
    GroupCalibration,
    HumanHuman,
    Interval,
    JudgeBlock,
    Kappa,
    KeyedRate,
    LabelView,
    ModelRating,
    OrderVerdict,
    PairComparison,
    PassRate,
    Positional,
    Proportion,
    Results,
    SuiteInfo,
    TaskView,
    write_results,
)

MODELS = [
    "openai/gpt-4o",
    "anthropic/claude-3-5-sonnet",
    "mistral/mistral-large",
    "openai/gpt-4o-mini",
    "sim/weak",
]
JUDGES = ["openai/gpt-4.1", "sim-judge/strict"]
SYSTEM_PROMPT = (
    "You compare two answers to the same task.\nRubric: be correct, be brief.\n"
    "Do not reward length or style.\nEnd with a last line: VERDICT: 1, VERDICT: 2 or VERDICT: TIE"
)
MEGABYTE_TEXT = ("lorem-ipsum-" * 90_000)[:1_000_000]
HOSTILE_ANSWERS = {
    "script": "Before <script>window.__pwned = 'script'</script> after",
    "onerror": 'Image: <img src="x" onerror="window.__pwned = \'onerror\'"> done',
    "javascript-link": (
        "[click me](javascript:window.__pwned='link') and <a href=\"javascript:alert(1)\">raw</a>"
    ),
    "svg-script": (
        "<svg onload=\"window.__pwned='svg'\"><script>window.__pwned='svg'</script></svg>"
    ),
    "unclosed": "<div><b>unclosed <table><tr><td>cell <!-- open comment",
    "iframe-form": (
        '<iframe src="https://example.com"></iframe>'
        '<form action="https://example.com"><input name="q"></form>'
    ),
    "megabyte": MEGABYTE_TEXT,
}


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _proportion(k: int, n: int) -> Proportion:
    if n == 0:
        return Proportion(k=0, n=0, rate=None)
    rate = k / n
    spread = 1.96 * math.sqrt(max(rate * (1 - rate), 0.01) / n)
    return Proportion(
        k=k, n=n, rate=rate, low=max(0.0, rate - spread), high=min(1.0, rate + spread)
    )


def _calibration(
    rng: random.Random, judge: str, tasks: Sequence[str], models: Sequence[str]
) -> Calibration:
    n = 60
    agree = 41
    pair = f"{models[0]} vs {models[1]}"
    return Calibration(
        status="calibrated",
        labels=n,
        labellers=["ana", "ben"],
        agreement=_proportion(agree, n),
        kappa=Kappa(value=0.52, low=0.33, high=0.69),
        confusion=Confusion(
            categories=["model a", "model b", "tie"],
            matrix=[[20, 4, 3], [3, 17, 2], [4, 3, 4]],
        ),
        agreement_no_ties=_proportion(37, 44),
        agreement_consistent=_proportion(35, 45),
        agreement_flipped=_proportion(6, 15),
        flip_rate=_proportion(15, 60),
        by_task=[KeyedRate(key=t, proportion=_proportion(3, 4)) for t in tasks[:3]],
        by_pair=[KeyedRate(key=pair, proportion=_proportion(9, 12))],
        by_length_quartile=[
            KeyedRate(
                key=f"q{q}",
                label=f"Q{q}: {q * 100} to {q * 100 + 99} chars",
                proportion=_proportion(10, 15),
            )
            for q in range(1, 5)
        ],
        per_labeller=[
            KeyedRate(key="ana", proportion=_proportion(22, 30)),
            KeyedRate(key="ben", proportion=_proportion(19, 30)),
        ],
        unmatched_labels=2,
        by_turn=[
            GroupCalibration(
                key=str(turn),
                label=f"Turn {turn}",
                agreement=_proportion(20, 30),
                agreement_no_ties=_proportion(17, 20),
                human_human=HumanHuman(
                    agreement=_proportion(8, 12),
                    agreement_no_ties=_proportion(7, 9),
                    kappa=Kappa(value=0.4),
                    shared_items=12,
                ),
                single_turn_tasks=3 if turn == 1 else 0,  # a suite mixing conversations
            )
            for turn in (1, 2)
        ],
        human_human=HumanHuman(
            agreement=_proportion(14, 20),
            agreement_no_ties=_proportion(13, 16),
            kappa=Kappa(value=0.48, low=0.2, high=0.71),
            shared_items=20,
        ),
        disagreements=[
            Disagreement(
                task_id=tasks[i % len(tasks)],
                model_a=models[0],
                model_b=models[1],
                labeller="ana",
                human=models[0],
                judge_combined="tie",
                flipped=True,
                judge_ab=models[0],
                judge_ba=models[1],
                rationale_ab=f"Answer 1 is **clearer** ({judge}, disagreement {i}).",
                rationale_ba="Answer 1 <script>window.__pwned='rationale'</script> is shorter.",
            )
            for i in range(3)
        ],
        objective={
            "objective_pairs": 34,
            "judge": {
                "overall": {
                    "n": 34,
                    "picks_passing": 28,
                    "rate": 0.8235,
                    "low": 0.66,
                    "high": 0.92,
                },
                "by_model_pair": [
                    {"model_a": "<b>pair</b>", "model_b": models[1], "rate": 0.5, "n": 4},
                ],
            },
        },
    )


def _block(
    rng: random.Random,
    judge: str,
    models: Sequence[str],
    tasks: Sequence[str],
    calibrated: bool,
    prompt: str | None,
) -> JudgeBlock:
    n = len(models)
    beta = [0.45 * (n - 1 - i) - 0.45 * (n - 1) / 2 for i in range(n)]
    groups = [i // 2 for i in range(n)]
    ratings = []
    for i, model in enumerate(models):
        win = sum(_sigmoid(beta[i] - beta[j]) for j in range(n) if j != i) / (n - 1)
        ratings.append(
            ModelRating(
                model=model,
                rank=2 * groups[i] + 1,
                rank_group=groups[i],
                rank_best=2 * groups[i] + 1,
                rank_worst=2 * groups[i] + groups.count(groups[i]),
                log_strength=Interval(estimate=beta[i], low=beta[i] - 0.3, high=beta[i] + 0.3),
                rating=Interval(
                    estimate=math.exp(beta[i]),
                    low=math.exp(beta[i] - 0.3),
                    high=math.exp(beta[i] + 0.3),
                ),
                win_rate_vs_field=Interval(
                    estimate=win, low=max(0, win - 0.08), high=min(1, win + 0.08)
                ),
                raw_win_rate=Interval(estimate=win, low=max(0, win - 0.1), high=min(1, win + 0.1)),
                comparisons=len(tasks) * (n - 1),
            )
        )
    pairwise = []
    matrix: list[list[float | None]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                matrix[i][j] = round(_sigmoid(3 * (beta[i] - beta[j])), 3)
    claims = []
    for i in range(n):
        for j in range(i + 1, n):
            d = beta[i] - beta[j]
            separated = groups[i] != groups[j]
            pairwise.append(
                PairComparison(
                    model_i=models[i],
                    model_j=models[j],
                    diff=Interval(estimate=d, low=d - 0.4, high=d + 0.4),
                    p_above=matrix[i][j] or 0.0,
                    separated=separated,
                )
            )
            if j == i + 1:
                if separated:
                    text = f"{models[i]} is rated above {models[j]} (in 99% of resamples)."
                    claims.append(Claim(kind="above", text=text, models=[models[i], models[j]]))
                else:
                    text = f"The data does not separate {models[i]} and {models[j]}."
                    claims.append(
                        Claim(
                            kind="not_separated",
                            text=text,
                            models=[models[i], models[j]],
                            tasks_needed=4 * len(tasks),
                        )
                    )
    pairs = n * (n - 1) // 2
    flips = rng.randint(0, len(tasks) * pairs // 4)
    return JudgeBlock(
        judge=judge,
        frame_hash=hashlib.sha256(judge.encode()).hexdigest()[:12] if prompt else None,
        system_prompt=prompt,
        ratings=ratings,
        pairwise=pairwise,
        p_above_matrix=matrix,
        rank_groups=[
            [m for m, g in zip(models, groups, strict=True) if g == k] for k in sorted(set(groups))
        ],
        claims=claims,
        diagnostics=Diagnostics(
            flip_rate=_proportion(flips, len(tasks) * pairs),
            flips_by_pair=[],
            flips_by_task=[],
            positional=Positional(first=40, second=35, ties=5, share_first=_proportion(40, 75)),
            cycles=Cycles(cyclic=1, decided_triples=20, undecided_triples=3, rate=0.05),
            connected=True,
            components=[list(models)],
            consistency=0.71,
            failures_by_reason={"no_verdict_line": 1},
            coverage=Coverage(
                answers_present=len(tasks) * n,
                answers_expected=len(tasks) * n,
                verdicts_present=len(tasks) * pairs * 2,
                verdicts_expected=len(tasks) * pairs * 2,
                incomplete_pairs=0,
            ),
            fit=FitInfo(iterations=6, gradient_norm=1e-10, converged=True),
        ),
        bootstrap=BootstrapInfo(unit="task", resamples=1000, seed=0, method="percentile"),
        calibration=_calibration(rng, judge, tasks, models)
        if calibrated
        else Calibration(status="uncalibrated"),
    )


def _answer_text(rng: random.Random, model: str, task: str, words: int) -> str:
    body = " ".join(
        rng.choice(["alpha", "beta", "gamma", "delta", "sigma", "tau"]) for _ in range(words)
    )
    code = "```python\ndef solve(x):\n    return x * 2\n```\n"
    return f"Answer of **{model}** to `{task}`.\n\n{body}\n\n{code}"


def make_results(
    run: str = "demo",
    *,
    models: Sequence[str] = tuple(MODELS),
    judges: Sequence[str] = tuple(JUDGES),
    n_tasks: int = 4,
    calibrated: Sequence[bool] | None = None,
    simulated: bool = False,
    hostile: bool = False,
    seed: int = 0,
    answer_words: int = 40,
    rationale_words: int = 20,
    suite_path: str | None = None,
    date: str = "2026-11-20",
) -> Results:
    """A complete, valid results file for `run`; `hostile` adds one task full of attacks."""
    rng = random.Random(f"{run}-{seed}")
    calibrated = (
        list(calibrated) if calibrated is not None else [i == 0 for i in range(len(judges))]
    )
    task_ids = [f"task-{i + 1:03d}" for i in range(n_tasks)]
    if hostile:
        task_ids.append("hostile")
    tasks = []
    for task_id in task_ids:
        answers = []
        for index, model in enumerate(models):
            if task_id == "hostile":
                kinds = list(HOSTILE_ANSWERS)
                text = HOSTILE_ANSWERS[kinds[index % len(kinds)]]
            else:
                text = _answer_text(rng, model, task_id, answer_words)
            answers.append(
                AnswerView(
                    model=model,
                    text=text,
                    finish_reason="stop",
                    tokens_out=len(text) // 4,
                    cost_usd=0.0012 if not model.startswith("sim/") else None,
                    latency_s=1.5,
                    checks=[
                        CheckView(
                            check="compiles",
                            passed=index % 2 == 0,
                            reason=None if index % 2 == 0 else "SyntaxError",
                            sandbox="static",
                        )
                    ],
                )
            )
        if hostile and task_id == "hostile":
            # Every model must show up once per kind, whatever the number of models.
            for extra, kind in enumerate(list(HOSTILE_ANSWERS)[len(models) :]):
                answers.append(
                    AnswerView(model=f"extra-{extra}-{kind}", text=HOSTILE_ANSWERS[kind])
                )
        comparisons = []
        for judge_index, judge in enumerate(judges):
            for i in range(len(models)):
                for j in range(i + 1, len(models)):
                    a, b = sorted((models[i], models[j]))
                    flipped = rng.random() < 0.2
                    winner_ab = a if rng.random() < 0.6 else b
                    winner_ba = (b if winner_ab == a else a) if flipped else winner_ab
                    words = " ".join(
                        rng.choice(["clear", "wrong", "short", "complete"])
                        for _ in range(rationale_words)
                    )
                    rationale = f"Answer 1 is *{words}*."
                    if task_id == "hostile":
                        rationale = (
                            HOSTILE_ANSWERS["script"] + " " + HOSTILE_ANSWERS["javascript-link"]
                        )
                    orders = [
                        OrderVerdict(
                            order="ab",
                            shown_first=a,
                            position_winner="1" if winner_ab == a else "2",
                            winner=winner_ab,
                            rationale=rationale,
                        ),
                        OrderVerdict(
                            order="ba",
                            shown_first=b,
                            position_winner="1" if winner_ba == b else "2",
                            winner=winner_ba,
                            rationale=rationale + " (second order)",
                        ),
                    ]
                    labels = (
                        [LabelView(labeller="ana", winner=a)]
                        if calibrated[judge_index] and i == 0 and j == 1
                        else []
                    )
                    comparisons.append(
                        ComparisonView(
                            judge=judge,
                            model_a=a,
                            model_b=b,
                            winner="tie" if flipped else winner_ab,
                            flipped=flipped,
                            complete=True,
                            orders=orders,
                            labels=labels,
                        )
                    )
        prompt = f"Write a function for **{task_id}**.\n\nIt must handle empty input."
        if task_id == "hostile":
            prompt = (
                "Hostile prompt <script>window.__pwned='prompt'</script> [x](javascript:alert(1))"
            )
        tasks.append(
            TaskView(
                id=task_id,
                prompt=prompt,
                reference="def solve(x): return 2 * x",
                answers=answers,
                comparisons=comparisons,
            )
        )
    blocks = [
        _block(
            rng,
            judge,
            models,
            task_ids,
            calibrated[k],
            SYSTEM_PROMPT + f"\n(judge {judge})" if k == 0 else None,
        )
        for k, judge in enumerate(judges)
    ]
    cost = [
        CostLine(
            who=m,
            role="generation",
            calls=len(task_ids),
            tokens_in=1000,
            tokens_out=4000,
            cost_usd=None if m.startswith("sim/") else 0.42,
            known_cost_usd=0.0 if m.startswith("sim/") else 0.42,
            unknown_price_calls=len(task_ids) if m.startswith("sim/") else 0,
            median_latency_s=1.5,
        )
        for m in models
    ] + [
        CostLine(
            who=j,
            role="judge",
            calls=100,
            tokens_in=50000,
            tokens_out=9000,
            cost_usd=1.5,
            known_cost_usd=1.5,
            median_latency_s=2.5,
        )
        for j in judges
    ]
    return Results(
        konkord_version="0.1.0",
        run=run,
        evidence_date=date,
        simulated=simulated,
        suite=SuiteInfo(
            name=f"Suite of {run}",
            path=suite_path or f"suites/{run}.yaml",
            rubric="Prefer the **correct** answer. <script>window.__pwned='rubric'</script>",
            answer_language="en",
            context=None,
            task_count=len(task_ids),
        ),
        models=list(models),
        judges=list(judges),
        judge_blocks=blocks,
        cost=cost,
        pass_rates=[
            PassRate(
                model=m,
                check="compiles",
                passed=3,
                total=4,
                rate=Interval(estimate=0.75, low=0.5, high=1.0),
            )
            for m in models
        ],
        tasks=tasks,
    )


def suite_yaml(results: Results) -> str:
    """A valid suite file matching the results' tasks, for runs.json to point at."""
    lines = [
        f"name: {json.dumps(results.suite.name)}",
        "rubric: Prefer the correct answer.",
        "tasks:",
    ]
    for task in results.tasks:
        lines.append(f"  - id: {task.id}")
        lines.append(f"    prompt: {json.dumps('Task ' + task.id)}")
    return "\n".join(lines) + "\n"


def write_project(root: Path, runs: Sequence[Results], *, templates: bool = True) -> Path:
    """Write runs.json, suites and results files for `runs` under `root`; returns runs.json.

    With `templates`, the repository's templates/ and content/ are copied in, so tests can
    edit them without touching the real ones.
    """
    import shutil

    repo = Path(__file__).resolve().parent.parent
    entries = []
    for results in runs:
        suite = root / results.suite.path
        suite.parent.mkdir(parents=True, exist_ok=True)
        suite.write_text(suite_yaml(results))
        write_results(results, root / "results" / f"{results.run}.json")
        entries.append(
            {
                "name": results.run,
                "suite": results.suite.path,
                "models": results.models,
                "judges": results.judges,
            }
        )
    runs_file = root / "runs.json"
    runs_file.write_text(json.dumps({"runs": entries}, indent=2) + "\n")
    if templates:
        for folder in ("templates", "content"):
            if not (root / folder).exists():
                shutil.copytree(repo / folder, root / folder)
    return runs_file


def standard_runs() -> list[Results]:
    """The fixture site: a two-judge run (one calibrated), a simulated run, a hostile run."""
    return [
        make_results("alpha", n_tasks=4),
        make_results(
            "sim-demo",
            models=["sim/strong", "sim/medium", "sim/weak"],
            judges=["sim-judge/fair"],
            calibrated=[True],
            simulated=True,
            n_tasks=3,
        ),
        make_results(
            "hostile",
            models=MODELS[:3],
            judges=JUDGES[:1],
            calibrated=[False],
            n_tasks=1,
            hostile=True,
        ),
    ]


def build_standard_site(root: Path) -> list[Results]:
    """Write the standard runs as a project in `root` and build its site into root/public."""
    runs = standard_runs()
    write_project(root, runs)
    build_project_site(root)
    return runs


def build_project_site(root: Path) -> None:
    """Build the site of the project in `root` into root/public, from inside `root` (as
    `konkord build` run there)."""
    import os

    from konkord.stages.build.build import build_site

    old = Path.cwd()
    os.chdir(root)
    try:
        build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    finally:
        os.chdir(old)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """A static host that logs nothing."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


CHROMIUM = Path("/usr/bin/chromium")  # Debian's: the browser tests skip without it
# every site browser test: marked, and skipped with its reason where chromium is missing
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[str]:
    """A plain static server on `folder` at a free local port; yields its address."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


DEMO_FOLDERS = ("suites", "runs", "results", "templates", "content")


@contextlib.contextmanager
def serving_demo_copy(root: Path, repo: Path) -> Iterator[str]:
    """The repository's demo project copied into `root`, built, and served; yields its address."""
    import shutil

    for folder in DEMO_FOLDERS:
        shutil.copytree(repo / folder, root / folder)
    shutil.copy(repo / "runs.json", root / "runs.json")
    build_project_site(root)
    with serving(root / "public") as address:
        yield address


def open_page(browser: Any, base: str, path: str, width: int) -> tuple[Any, list[str]]:
    """A page of the served site at `width`, with a list that collects its console errors,
    page errors and any request that leaves the site."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "request",
        lambda r: not r.url.startswith((base, "data:")) and problems.append(f"outside: {r.url}"),
    )
    page.goto(f"{base}{path}")
    return page, problems
