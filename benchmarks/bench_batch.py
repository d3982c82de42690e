"""100,000 judge requests through the batch path; prints wall time and peak memory.

    python benchmarks/bench_batch.py                # 100,000 requests
    python benchmarks/bench_batch.py 20000          # fewer
    python benchmarks/bench_batch.py --stage        # the whole judge stage, evidence included

Each request is a real judge call as the judge stage builds it (Konkord's frame, a rubric, a
task, two answers of about 700 characters), asked through `BatchClient.complete()` exactly as
the stage asks: the requests are written to JSONL spool files, uploaded to a local fake of the
OpenAI files and batches endpoints with litellm's `acreate_file`, submitted with
`acreate_batch` (50,000 per batch, OpenAI's limit), polled with `aretrieve_batch`, downloaded
with `afile_content(stream=True)`, and every reply is parsed into a CallResult and then into a
verdict with the judge's own parser. The fake runs in its own process, so its CPU and memory do
not count; the figures are the client's. Aim: under 60 s and under 500 MB.

With --stage, the same number of calls goes through `judge_run` itself (20 models' answers in
the evidence, both orders, every verdict appended to the evidence log), so the figure covers
the stage's own bookkeeping too.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "openai_batch_server.py"
JUDGE = "openai/bench-judge"
T0 = time.perf_counter()
MODELS = [f"openai/model-{i:02d}" for i in range(20)]


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s(who: int = resource.RUSAGE_SELF) -> float:
    """CPU seconds (user + system): on a shared machine, wall time also counts the others."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def write_suite(directory: Path, n_tasks: int) -> Path:
    lines = ["name: bench", "rubric: Prefer the correct, complete and clear answer.", "tasks:"]
    for i in range(n_tasks):
        lines += [
            f"  - id: t{i:04d}",
            f"    prompt: Write a function that solves problem number {i} and explain it.",
        ]
    path = directory / "bench.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@cache
def answer(task: int, model: int) -> str:
    """One answer text per (task, model), shared by its calls as the stage shares them."""
    body = f"def solve_{task}(x):\n    return x * {model} + {task}\n"
    prose = f"The function multiplies by {model} and adds {task}; it runs in constant time. "
    return f"```python\n{body}```\n\n" + prose * 6


async def ask_all(n: int, url: str, directory: Path) -> tuple[int, int, float]:
    from itertools import combinations

    from konkord.configuration.judge_frame import parse_verdict
    from konkord.configuration.runspec import RunSpec
    from konkord.configuration.suite import load_suite
    from konkord.evidence.log import EvidenceLog
    from konkord.providers.batch import BatchClient
    from konkord.stages.judge.judge import JudgeItem, judge_messages, judge_settings

    pairs = list(combinations(range(len(MODELS)), 2))
    n_tasks = max(1, -(-n // (2 * len(pairs))))
    suite_path = write_suite(directory, n_tasks)
    spec = RunSpec("bench", suite_path, load_suite(suite_path), tuple(MODELS), (JUDGE,))
    settings = judge_settings(512, url)
    client = BatchClient(
        log=EvidenceLog(directory / "runs" / "bench"),
        cache_dir=directory / ".konkord" / "cache",
        poll_s=0.05,
        quiet_s=0.2,
        on_status=lambda text: print(f"  {time.perf_counter() - T0:6.1f} s  {text}"),
    )
    decided = 0
    failed = 0
    parse_s = 0.0

    async def one(index: int) -> None:
        nonlocal decided, failed, parse_s
        task_index, rest = divmod(index, 2 * len(pairs))
        (a, b), order = pairs[rest // 2], ("ab", "ba")[rest % 2]
        item = JudgeItem(
            spec.suite.tasks[task_index], MODELS[a], MODELS[b], order, JUDGE,
            answer(task_index, a), answer(task_index, b),
        )
        result = await client.complete(JUDGE, judge_messages(spec, item), settings)
        started = time.perf_counter()
        if result.ok and parse_verdict(result.text).position is not None:
            decided += 1
        else:
            failed += 1
        parse_s += time.perf_counter() - started

    await asyncio.gather(*(one(i) for i in range(n)))
    return decided, failed, parse_s


async def judge_stage(n: int, url: str, directory: Path) -> tuple[int, int, float]:
    """`judge_run` over enough tasks for n calls, with answers already in the evidence."""
    from konkord.configuration.call_settings import CallSettings
    from konkord.configuration.runspec import RunSpec
    from konkord.configuration.suite import load_suite
    from konkord.evidence.log import EvidenceLog, now_iso
    from konkord.providers.batch import BatchClient
    from konkord.stages.judge.judge import judge_run
    from konkord.stages.run import answer_key_hash, answer_messages

    pairs = len(MODELS) * (len(MODELS) - 1) // 2
    n_tasks = max(1, -(-n // (2 * pairs)))
    suite_path = write_suite(directory, n_tasks)
    settings = CallSettings(api_base=url)
    spec = RunSpec("bench", suite_path, load_suite(suite_path), tuple(MODELS), (JUDGE,),
                   settings=settings)
    log = EvidenceLog(spec.run_dir)
    log.append_many("answers", [
        {"kind": "answer", "task_id": task.id, "model": model, "error": None,
         "settings_hash": answer_key_hash(answer_messages(spec.suite, task), settings),
         "text": answer(t, m), "finish_reason": "stop", "created_at": now_iso()}
        for t, task in enumerate(spec.suite.tasks) for m, model in enumerate(MODELS)
    ])
    client = BatchClient(
        log=log,
        cache_dir=directory / ".konkord" / "cache",
        poll_s=0.05,
        quiet_s=0.2,
        on_status=lambda text: print(f"  {time.perf_counter() - T0:6.1f} s  {text}"),
    )
    summary = await judge_run(spec, (JUDGE,), client, concurrency=10**9, max_tokens=512)
    tally = summary.tallies[JUDGE]
    return tally.judged + tally.cached, tally.failed, 0.0


def main() -> None:
    stage = "--stage" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--stage"]
    n = int(args[0]) if args else 100_000
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    server = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    try:
        from konkord.providers.loading import load_litellm

        load_litellm()  # the 5 s import is not the batch path's cost
        import konkord.providers.batch  # noqa: F401

        baseline = peak_mb()
        with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
            os.chdir(tmp)
            global T0
            started = T0 = time.perf_counter()
            cpu_before = cpu_s()
            run = judge_stage if stage else ask_all
            decided, failed, parse_s = asyncio.run(run(n, url, Path(tmp)))
            wall = time.perf_counter() - started
            cpu = cpu_s() - cpu_before
            batches = (Path(tmp) / "runs" / "bench" / "batches.jsonl").read_text().count(
                '"submitted"'
            )
    finally:
        server.terminate()
        server.wait()
    what = "the judge stage (evidence included)" if stage else "the batch path"
    print(f"judge requests through {what}: {decided + failed:,} in {batches} batches")
    print(f"  verdicts parsed {decided:,}, failed {failed:,}")
    print(f"  wall time {wall:.1f} s ({(decided + failed) / wall:,.0f} requests/s; aim < 60 s)")
    print(f"  CPU time {cpu:.1f} s in Konkord's process, {cpu_s(resource.RUSAGE_CHILDREN):.1f} s "
          "in the fake server's (the two share the machine)")
    if not stage:
        print(f"  of which parsing verdicts {parse_s:.1f} s")
    print(f"  peak memory {peak_mb():.0f} MB (after importing litellm: {baseline:.0f} MB; "
          "aim < 500 MB)")


if __name__ == "__main__":
    main()
