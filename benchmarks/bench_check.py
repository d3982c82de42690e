"""How long the `tests` check takes per answer in the bwrap sandbox; prints figures.

    python benchmarks/bench_check.py [--repeat N] [--sandbox bwrap|none]

Checks every reference answer of suites/python_codegen.yaml (29 tasks) one after the other,
N times (default 3), and prints the median, the 90th percentile and the maximum wall time per
answer, the CPU time per answer of all the processes a check starts (less sensitive to a
loaded machine than wall time), and the time of the whole pass; every reference must pass.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

from konkord.checks.runner import run_tests
from konkord.checks.sandbox import Limits
from konkord.configuration.suite import load_suite

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sandbox", default="bwrap", choices=("bwrap", "none"))
    args = parser.parse_args()
    suite = load_suite(REPO / "suites" / "python_codegen.yaml")
    tasks = [t for t in suite.tasks if t.tests and t.reference]
    times: list[float] = []
    passes: list[float] = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(args.repeat):
        start = time.perf_counter()
        for task in tasks:
            began = time.perf_counter()
            result = run_tests(task.reference or "", task.tests or "", Limits(), args.sandbox)
            times.append(time.perf_counter() - began)
            if not result.passed:
                sys.exit(f"reference of {task.id} failed: {result.reason}")
        passes.append(time.perf_counter() - start)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / len(times)
    times.sort()
    p90 = times[int(0.9 * (len(times) - 1))]
    print(f"{len(tasks)} reference answers x {args.repeat}, sandbox {args.sandbox}")
    print(f"per answer: median {statistics.median(times) * 1000:.0f} ms, "
          f"p90 {p90 * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms")
    print(f"CPU per answer (all processes of the check): {cpu * 1000:.0f} ms")
    print(f"whole pass: median {statistics.median(passes):.2f} s")


if __name__ == "__main__":
    main()
