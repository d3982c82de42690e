"""Kill -9 harness for `konkord run`, `judge` and `report`: kills, records lost, calls paid twice.

    python benchmarks/kill_harness.py              # strace kills at each file, plus 10+10 random
    python benchmarks/kill_harness.py --random 4   # fewer random kills
    python benchmarks/kill_harness.py --ctrl-c 10 --random 0 --no-strace   # Ctrl-C only
    python benchmarks/kill_harness.py --random 10 --ctrl-c 5 --label 6      # everything
    python benchmarks/kill_harness.py --batch-live 3 --random 0 --no-strace # batch, then live
    python benchmarks/kill_harness.py --processes 2 --random 6 --ctrl-c 3    # judge call pool

Two kinds of kill, each followed by a clean rerun of the same command:
(a) strace -e inject=write:signal=KILL -P FILE at the 1st, 2nd and 5th write to each file the
    stage writes (answers, verdicts, prompts, the response cache), and at the first fsync (the
    temporary file of run.json or of the results file, just before its rename);
(b) SIGKILL at a random moment after the first record reached the log, during run and judge;
(c) with --ctrl-c N, one SIGINT at a random moment instead: the calls in flight must land in
    the log, so that here even the replies in flight are never asked again;
(d) with --label N, kills during `konkord label` (see benchmarks/kill_label.py);
(e) with --batch-live N, kills of `run --batch` and `judge --batch` with a batch open, each
    followed by live reruns (see benchmarks/kill_batch.py).

After each kill: every rewritten file (run.json, results) parses or is absent; after the rerun
every evidence record present before the kill is still there, the log is complete with no key
twice, and "paid twice" counts requests for a prompt whose reply Konkord already held (in the
response cache or the log) when it was killed. Replies lost in flight by a kill -9 are asked
again by design and counted apart. The local server is tests/openai_server.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from openai_server import OpenAIServer, Reply, user_text  # noqa: E402

from konkord.evidence.log import STREAM_KEYS, record_key  # noqa: E402
from konkord.providers.calls import ResponseCache  # noqa: E402
from konkord.providers.llm import CallSettings, ModelClient  # noqa: E402
from konkord.stages.judge.judge_call import judge_settings  # noqa: E402

KONKORD = [sys.executable, "-m", "konkord.cli"]
MODELS = ["openai/a", "openai/b", "openai/c"]
TASKS = 8
ANSWERS = TASKS * len(MODELS)
VERDICTS = TASKS * 3 * 2
STRACE = shutil.which("strace")


def responder(body: dict[str, Any], n: int) -> Reply:
    text = user_text(body)
    delay = random.uniform(0.02, 0.25)
    if "VERDICT" in text:
        return Reply(f"The first is tidier.\nVERDICT: {1 + n % 2}", delay_s=delay)
    return Reply(f"an answer to {text[-24:]}", delay_s=delay)


@dataclass
class Tally:
    kills: int = 0
    not_landed: list[str] = field(default_factory=list)  # injections that never fired
    records_lost: int = 0
    paid_twice: int = 0
    lost_in_flight: int = 0  # replies a kill -9 took before Konkord held them: asked again
    interrupts: int = 0
    ctrl_c_asked_again: int = 0  # replies in flight at Ctrl-C asked again (must be 0)
    broken_files: list[str] = field(default_factory=list)
    failed_reruns: list[str] = field(default_factory=list)
    workers_left: int = 0  # judge worker processes (--processes) alive after their parent died


class Harness:
    def __init__(self, server: OpenAIServer) -> None:
        self.server = server
        self.env = os.environ | {
            "PYTHONPATH": str(REPO),
            "OPENAI_API_KEY": "sk-harness-0000000000",
            "KONKORD_BACKOFF_BASE": "0.01",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.tally = Tally()

    def project(self, with_answers: bool) -> Path:
        root = Path(tempfile.mkdtemp(prefix="konkord-kill-"))
        tasks = "\n".join(f"  - {{id: q{i}, prompt: Question number {i}?}}" for i in range(TASKS))
        (root / "s.yaml").write_text(f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}\n")
        if with_answers:
            self.call(root, self.run_args())
        return root

    def run_args(self) -> list[str]:
        return ["run", "--suite", "s.yaml", "--models", ",".join(MODELS),
                "--api-base", self.server.url, "--concurrency", "4"]

    processes = 1  # --processes of every `konkord judge` (main's --processes)

    def judge_args(self) -> list[str]:
        return ["judge", "--run", "s", "--judge", "openai/judge", "--concurrency", "4",
                "--processes", str(self.processes)]

    def call(self, root: Path, args: list[str], prefix: list[str] | None = None) -> int:
        done = subprocess.run([*(prefix or []), *KONKORD, *args], cwd=root, env=self.env,
                              capture_output=True, text=True, timeout=300)
        return done.returncode

    # --- what Konkord held when it died ---------------------------------------------------
    @staticmethod
    def records(root: Path) -> dict[str, list[str]]:
        out = {}
        for stream in STREAM_KEYS:
            path = root / "runs" / "s" / f"{stream}.jsonl"
            lines = path.read_bytes().split(b"\n")[:-1] if path.exists() else []
            out[stream] = [line.decode() for line in lines if _whole(line)]
        return out

    def held_keys(self, root: Path, records: dict[str, list[str]]) -> set[str]:
        cache = ResponseCache(root / ".konkord" / "cache")
        return set(cache._load_index())

    def request_key(self, body: dict[str, Any]) -> str:
        model = f"openai/{body['model']}"
        judging = "VERDICT" in user_text(body)
        settings = judge_settings(8192, self.server.url) if judging else CallSettings(
            api_base=self.server.url
        )
        return ModelClient(cache_dir=None).cache_key(model, body["messages"], settings)

    # --- one trial ---------------------------------------------------------------------------
    def check_files(self, root: Path, label: str) -> None:
        for path in [root / "runs" / "s" / "run.json", root / "results" / "s.json"]:
            if path.exists():
                try:
                    json.loads(path.read_text())
                except ValueError:
                    self.tally.broken_files.append(f"{label}: {path.name}")

    def after_kill(self, root: Path, label: str, args: list[str], sent_before: int) -> None:
        self.tally.kills += 1
        self.check_files(root, label)
        before = self.records(root)
        held = self.held_keys(root, before)
        asked_during = [self.request_key(b) for b in self.server.requests[sent_before:]]
        mark = len(self.server.requests)
        code = self.call(root, args)
        if code != 0:
            self.tally.failed_reruns.append(f"{label}: exit {code}")
        after = self.records(root)
        for stream, lines in before.items():
            self.tally.records_lost += len(set(lines) - set(after[stream]))
        asked_again = [self.request_key(b) for b in self.server.requests[mark:]]
        self.tally.paid_twice += sum(1 for key in asked_again if key in held)
        during = set(asked_during)
        self.tally.lost_in_flight += sum(1 for k in asked_again if k in during and k not in held)
        self.check_files(root, label)
        self.check_complete(root, label)

    def check_complete(self, root: Path, label: str) -> None:
        for stream, expected in (("answers", ANSWERS), ("verdicts", VERDICTS)):
            lines = self.records(root)[stream]
            if not lines:
                continue
            keys = Counter(record_key(stream, json.loads(line)) for line in lines)
            if len(keys) != expected or max(keys.values()) > 1:
                self.tally.failed_reruns.append(f"{label}: {stream} {len(keys)} keys, dup")

    def strace_kill(self, stage: str, target: str, when: int) -> None:
        assert STRACE is not None
        root = self.project(with_answers=stage != "run")
        if stage == "report":
            self.call(root, self.judge_args())
        args = {"run": self.run_args(), "judge": self.judge_args(),
                "report": ["report", "--run", "s", "--resamples", "50"]}[stage]
        if target == "fsync":
            prefix = [STRACE, "-f", "-qq", "-o", os.devnull, "-e", "trace=fsync",
                      "-e", f"inject=fsync:signal=KILL:when={when}"]
        else:
            path = (root / target).resolve()
            prefix = [STRACE, "-f", "-qq", "-o", os.devnull, "-e", "trace=write",
                      "-e", f"inject=write:signal=KILL:when={when}", "-P", str(path)]
        sent = len(self.server.requests)
        code = self.call(root, args, prefix)
        label = f"{stage} {target} #{when}"
        if code not in (137, -9):
            self.tally.not_landed.append(label)
        else:
            self.after_kill(root, label, args, sent)
        shutil.rmtree(root, ignore_errors=True)

    def random_kill(self, stage: str, sig: signal.Signals = signal.SIGKILL) -> None:
        root = self.project(with_answers=stage == "judge")
        args = self.run_args() if stage == "run" else self.judge_args()
        log = root / "runs" / "s" / ("answers.jsonl" if stage == "run" else "verdicts.jsonl")
        sent = len(self.server.requests)
        child = subprocess.Popen([*KONKORD, *args], cwd=root, env=self.env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 preexec_fn=_default_sigint)  # a background shell ignores it
        deadline = time.monotonic() + 120
        while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(random.uniform(0.0, 1.5))
        if child.poll() is None:
            workers = _children(child.pid)
            child.send_signal(sig)
            code = child.wait()
            if sig == signal.SIGKILL:
                time.sleep(1.0)  # PR_SET_PDEATHSIG and the closed pipe act at once
                self.tally.workers_left += sum(_alive(pid) for pid in workers)
            if sig == signal.SIGINT and code == 0:  # the work was done: nothing to interrupt
                self.tally.not_landed.append(f"{stage} ctrl-c (came as the command ended)")
            elif sig == signal.SIGINT:
                self.tally.interrupts += 1
                if code != 130:
                    self.tally.failed_reruns.append(f"{stage} ctrl-c: exit {code}")
                lost = self.tally.lost_in_flight
                self.after_kill(root, f"{stage} ctrl-c", args, sent)
                self.tally.kills -= 1
                self.tally.ctrl_c_asked_again += self.tally.lost_in_flight - lost
                self.tally.lost_in_flight = lost
            else:
                self.after_kill(root, f"{stage} random", args, sent)
        else:
            self.tally.not_landed.append(f"{stage} random (finished first)")
        shutil.rmtree(root, ignore_errors=True)


def _children(pid: int) -> set[int]:
    """The processes `pid` started (its call pool's workers), from /proc."""
    found: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found |= {int(t) for t in (task / "children").read_text().split()}
    except OSError:
        pass
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _whole(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--random", type=int, default=10, help="random kills per stage")
    parser.add_argument("--ctrl-c", type=int, default=0, help="random Ctrl-Cs per stage")
    parser.add_argument("--no-strace", action="store_true", help="skip the strace kills")
    parser.add_argument("--label", type=int, default=0,
                        help="kills during `konkord label` (benchmarks/kill_label.py)")
    parser.add_argument("--batch-live", type=int, default=0,
                        help="kills of --batch runs with a batch open, rerun live, per stage")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--processes", type=int, default=1,
                        help="`konkord judge --processes N`: calls made in N worker processes")
    options = parser.parse_args()
    random.seed(options.seed)
    server = OpenAIServer(responder)
    server._httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]
    server.start()
    harness = Harness(server)
    harness.processes = options.processes
    started = time.monotonic()
    try:
        # the harness reads the cache right: every reply of a clean run is found in it
        root = harness.project(with_answers=True)
        held = harness.held_keys(root, {})
        keys = [harness.request_key(b) for b in server.requests]
        assert keys and all(k in held for k in keys), "request keys do not match the cache"
        shutil.rmtree(root, ignore_errors=True)
        if STRACE and not options.no_strace:
            plan = [("run", "fsync", 1)]
            plan += [("run", f, w) for f in ("runs/s/answers.jsonl",
                                             ".konkord/cache/responses.jsonl") for w in (1, 2, 5)]
            plan += [("judge", f, w) for f in ("runs/s/verdicts.jsonl", "runs/s/prompts.jsonl",
                                               ".konkord/cache/responses.jsonl") for w in (1, 2, 5)]
            plan += [("run", "runs/s/run.json", 1), ("report", "fsync", 1)]
            for stage, target, when in plan:
                harness.strace_kill(stage, target, when)
                print(f"  strace {stage} {target} #{when}: kills so far {harness.tally.kills}",
                      flush=True)
        else:
            print("no strace kills (--no-strace, or strace not installed)", flush=True)
        for stage in ("run", "judge"):
            for _ in range(options.random):
                harness.random_kill(stage)
            print(f"  random kills during {stage}: done", flush=True)
            for _ in range(options.ctrl_c):
                harness.random_kill(stage, signal.SIGINT)
            print(f"  random Ctrl-Cs during {stage}: done", flush=True)
    finally:
        server.stop()
    t = harness.tally
    print(f"\nkills landed: {t.kills}; never fired: {len(t.not_landed)} {t.not_landed}")
    print(f"records lost: {t.records_lost}")
    print(f"calls paid twice (reply already held by Konkord): {t.paid_twice}")
    print(f"replies lost in flight by the kill, asked again: {t.lost_in_flight}")
    print(f"Ctrl-C: {t.interrupts}; replies in flight at Ctrl-C asked again: "
          f"{t.ctrl_c_asked_again}")
    print(f"torn or empty rewritten files: {len(t.broken_files)} {t.broken_files}")
    print(f"reruns that did not finish cleanly: {len(t.failed_reruns)} {t.failed_reruns}")
    print(f"worker processes alive after kill -9 of their parent: {t.workers_left}")
    if options.label:
        from kill_label import print_tally, run_label_kills

        print_tally(run_label_kills(options.label))
    if options.batch_live:
        from kill_batch import print_tally as print_batch_tally
        from kill_batch import run_batch_kills

        print_batch_tally(run_batch_kills(options.batch_live))
    print(f"time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
