"""How fast `konkord run` and `konkord judge` are against a local OpenAI-compatible server.

    python benchmarks/bench_run.py            # all three measurements
    python benchmarks/bench_run.py a c        # only some of them

(a) 1,000 requests at 500 ms latency with 16 calls in flight, wall time against the ideal
    1000 x 0.5 / 16 s (aim: <= 1.2x): `konkord run` (2 models x 500 tasks, --concurrency 8
    per model) and `konkord judge` (500 pairs in both orders, --concurrency 16).
(b) 2,000 requests at 0 ms latency with 32 calls in flight, throughput against a bare loop of
    litellm.acompletion with a semaphore of 32, measured in the same round (aim: >= 0.9x):
    `konkord run` (2 models x 1000 tasks, --concurrency 16 per model) and `konkord judge`
    (1000 pairs in both orders, --concurrency 32). The judge is set beside two bare loops: one
    sending one-line prompts, as run's, and one sending the judge's own messages (system prompt,
    task, both answers: litellm's own cost per call grows with the message). Median and range
    of 3 rounds, wall time and client CPU.
(c) start-up time of `konkord --help` and `konkord validate SUITE` (aim: < 0.5 s).

The server runs in its own process so that its CPU does not count against the client; its
replies end in a verdict line, so the judge parses every one. Both (a) and (b) run the real
commands in-process (click, progress bar, cache, evidence log with fsync), after litellm has
been imported once, so the figures are the commands' own cost and not the 5 s import; the
bare loop gets the same warm-up. The judge's answers are made beforehand, untimed, and each
judge round starts from a copy of them without the response cache.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "openai_server.py"
FAKE_KEY = "sk-bench-not-a-real-key"


def start_server(delay_s: float) -> tuple[subprocess.Popen[str], str]:
    """The test server in a child process; returns it and its api_base."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "0", str(delay_s), "verdict"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url


def write_suite(directory: Path, n_tasks: int) -> Path:
    """A suite of `n_tasks` short prompts."""
    lines = ["name: bench", "rubric: Be correct and brief.", "tasks:"]
    for i in range(n_tasks):
        lines += [f"  - id: t{i:05d}", f"    prompt: Task number {i}, answer briefly."]
    path = directory / "bench.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def konkord_run(n_tasks: int, per_model_concurrency: int, url: str) -> float:
    """Wall time of `konkord run` (in-process) over 2 models x n_tasks, in a fresh directory."""
    from click.testing import CliRunner

    from konkord.cli import cli

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        suite = write_suite(Path(tmp), n_tasks)
        runner = CliRunner()
        started = time.perf_counter()
        result = runner.invoke(
            cli,
            [
                "run",
                "--suite",
                str(suite),
                "--models",
                "openai/bench-a,openai/bench-b",
                "--api-base",
                url,
                "--concurrency",
                str(per_model_concurrency),
            ],
            catch_exceptions=False,
        )
        elapsed = time.perf_counter() - started
        os.chdir(REPO)
        if result.exit_code != 0:
            raise SystemExit(f"konkord run failed:\n{result.output}")
        lines = Path(tmp, "runs", "bench", "answers.jsonl").read_text().splitlines()
        assert len(lines) == 2 * n_tasks, len(lines)
    return elapsed


def answered_project(n_tasks: int, url: str, root: Path) -> Path:
    """A project in `root` whose run "bench" has answers of 2 models to n_tasks (untimed)."""
    from click.testing import CliRunner

    from konkord.cli import cli

    suite = write_suite(root, n_tasks)
    os.chdir(root)
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--suite",
            suite.name,  # relative, so that the copies the judge works on find it inside them
            "--models",
            "openai/bench-a,openai/bench-b",
            "--api-base",
            url,
            "--concurrency",
            "16",
        ],
        catch_exceptions=False,
    )
    os.chdir(REPO)
    if result.exit_code != 0:
        raise SystemExit(f"konkord run failed:\n{result.output}")
    shutil.rmtree(root / ".konkord", ignore_errors=True)  # the judge must not find its replies
    return root


def konkord_judge(project: Path, n_tasks: int, concurrency: int, url: str) -> float:
    """Wall time of `konkord judge` (in-process) over every pair of a copy of `project`."""
    from click.testing import CliRunner

    from konkord.cli import cli

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "project"
        shutil.copytree(project, work)
        os.chdir(work)
        started = time.perf_counter()
        result = CliRunner().invoke(
            cli,
            [
                "judge",
                "--run",
                "bench",
                "--judge",
                "openai/bench-judge",
                "--api-base",
                url,
                "--concurrency",
                str(concurrency),
            ],
            catch_exceptions=False,
        )
        elapsed = time.perf_counter() - started
        os.chdir(REPO)
        if result.exit_code != 0:
            raise SystemExit(f"konkord judge failed:\n{result.output}")
        lines = (work / "runs" / "bench" / "verdicts.jsonl").read_text().splitlines()
        assert len(lines) == 2 * n_tasks, len(lines)
        assert all('"kind": "verdict"' in line for line in lines), lines[0]
    return elapsed


def judge_prompts(project: Path) -> list[list[dict[str, str]]]:
    """The messages `konkord judge` sends for every pair of `project` (system prompt, task and
    both answers), composed by konkord itself, untimed: the bare loop's judge-sized anchor."""
    from konkord.configuration.runspec import resolve_run
    from konkord.stages.judge.judge import calls_to_make, judge_messages

    os.chdir(project)
    try:
        spec = resolve_run("bench")
        items = calls_to_make(spec, ["openai/bench-judge"])
        return [[dict(m) for m in judge_messages(spec, item)] for item in items]
    finally:
        os.chdir(REPO)


def bare_loop(
    n_requests: int,
    concurrency: int,
    url: str,
    prompts: list[list[dict[str, str]]] | None = None,
) -> float:
    """Wall time of n_requests litellm.acompletion calls under one semaphore, nothing else;
    with `prompts`, call k sends prompts[k] (the judge's own messages) instead of one line."""
    from konkord.providers.loading import load_litellm

    litellm = load_litellm()

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with gate:
                short = [{"role": "user", "content": f"Task number {i}, answer briefly."}]
                await litellm.acompletion(
                    model=f"openai/bench-{'ab'[i % 2]}",
                    messages=short if prompts is None else prompts[i],
                    api_base=url,
                    max_tokens=4096,
                    temperature=0.0,
                    seed=0,
                    timeout=120,
                    num_retries=0,
                    max_retries=0,
                )

        await asyncio.gather(*(one(i) for i in range(n_requests)))

    started = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - started


def warm_up(url: str) -> None:
    """Import litellm and make one call, so neither contender pays for it."""
    bare_loop(4, 2, url)


def bench_latency() -> None:
    proc, url = start_server(0.5)
    try:
        warm_up(url)
        with tempfile.TemporaryDirectory() as tmp:
            project = answered_project(500, url, Path(tmp))
            judged = konkord_judge(project, 500, 16, url)
        wall = konkord_run(500, 8, url)
        bare = bare_loop(1000, 16, url)
    finally:
        proc.terminate()
        proc.wait()
    ideal = 1000 * 0.5 / 16
    print(
        f"(a) 1000 requests, 500 ms each, 16 in flight: ideal {ideal:.2f} s; konkord run "
        f"{wall:.1f} s ({wall / ideal:.2f}x), konkord judge {judged:.1f} s "
        f"({judged / ideal:.2f}x) (aim <= 1.2x); for reference a bare litellm loop takes "
        f"{bare:.1f} s ({bare / ideal:.2f}x): litellm's own CPU per call is serialised on one "
        "event loop"
    )


def _timed(work: Callable[[], float]) -> tuple[float, float]:
    """(wall, CPU of this process) seconds of one call."""
    cpu = time.process_time()
    wall = work()
    return wall, time.process_time() - cpu


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x [{min(values):.2f}-{max(values):.2f}]"


def bench_throughput(repeats: int = 3) -> None:
    proc, url = start_server(0.0)
    bare: list[tuple[float, float]] = []
    sized: list[tuple[float, float]] = []
    kon: list[tuple[float, float]] = []
    jud: list[tuple[float, float]] = []
    try:
        warm_up(url)
        with tempfile.TemporaryDirectory() as tmp:
            project = answered_project(1000, url, Path(tmp))
            prompts = judge_prompts(project)
            assert len(prompts) == 2000, len(prompts)
            for _ in range(repeats):  # interleaved, so all four see the same machine load
                bare.append(_timed(lambda: bare_loop(2000, 32, url)))
                kon.append(_timed(lambda: konkord_run(1000, 16, url)))
                sized.append(_timed(lambda: bare_loop(2000, 32, url, prompts)))
                jud.append(_timed(lambda: konkord_judge(project, 1000, 32, url)))
    finally:
        proc.terminate()
        proc.wait()
    # Each round's ratio against the bare loop of the same round; CPU ratios as well, since on a
    # shared machine the client's own CPU per call is what wall time is made of.
    run_ratio = [b / k for (b, _), (k, _) in zip(bare, kon, strict=True)]
    judge_ratio = [b / j for (b, _), (j, _) in zip(bare, jud, strict=True)]
    sized_ratio = [b / j for (b, _), (j, _) in zip(sized, jud, strict=True)]
    run_cpu = [b / k for (_, b), (_, k) in zip(bare, kon, strict=True)]
    judge_cpu = [b / j for (_, b), (_, j) in zip(bare, jud, strict=True)]
    sized_cpu = [b / j for (_, b), (_, j) in zip(sized, jud, strict=True)]

    def rate(rows: list[tuple[float, float]]) -> str:
        return f"{2000 / statistics.median(w for w, _ in rows):.0f} req/s"

    def cpu(rows: list[tuple[float, float]]) -> str:
        return f"{statistics.median(c for _, c in rows) / 2000 * 1000:.1f} ms"

    print(
        f"(b) 2000 requests, 0 ms, 32 in flight, {repeats} rounds (median [range]), aim >= 0.9x:\n"
        f"    bare litellm loop (one-line prompts) {rate(bare)}, CPU {cpu(bare)} per request\n"
        f"    bare litellm loop (the judge's messages) {rate(sized)}, CPU {cpu(sized)}\n"
        f"    konkord run {rate(kon)}, CPU {cpu(kon)}: {_spread(run_ratio)} of the bare loop "
        f"(CPU {_spread(run_cpu)})\n"
        f"    konkord judge {rate(jud)}, CPU {cpu(jud)}: {_spread(judge_ratio)} of the bare loop "
        f"(CPU {_spread(judge_cpu)}); {_spread(sized_ratio)} of the bare loop sending the "
        f"judge's messages (CPU {_spread(sized_cpu)})\n"
        f"    wall s: bare {[round(w, 1) for w, _ in bare]}, judge-sized bare "
        f"{[round(w, 1) for w, _ in sized]}, run {[round(w, 1) for w, _ in kon]}, judge "
        f"{[round(w, 1) for w, _ in jud]}"
    )


def bench_startup(repeats: int = 5) -> None:
    konkord = Path(sys.executable).parent / "konkord"
    command = [str(konkord)] if konkord.exists() else [sys.executable, "-m", "konkord.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        suite = write_suite(Path(tmp), 30)
        for label, args in (("konkord --help", ["--help"]), ("konkord validate", [str(suite)])):
            if label == "konkord validate":
                args = ["validate", *args]
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                subprocess.run([*command, *args], check=True, capture_output=True)
                times.append(time.perf_counter() - started)
            print(
                f"(c) {label}: median {statistics.median(times):.3f} s, "
                f"max {max(times):.3f} s over {repeats} (aim < 0.5 s)"
            )


def main() -> None:
    os.environ.setdefault("OPENAI_API_KEY", FAKE_KEY)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    wanted = set(sys.argv[1:]) or {"a", "b", "c"}
    if "c" in wanted:
        bench_startup()
    if "a" in wanted:
        bench_latency()
    if "b" in wanted:
        bench_throughput()


if __name__ == "__main__":
    main()
