"""Kill -9 a `--batch` run with its batch open at the provider, then rerun it live.

    python benchmarks/kill_harness.py --batch-live 3 --random 0 --no-strace
    python benchmarks/kill_batch.py 3          # the same, alone

For `run` and `judge` in turn: `konkord STAGE --batch` runs against tests/openai_batch_server.py
holding its batches in progress, and is killed (SIGKILL) a random moment after its first batch
is on record. Then, as a user who gave up on batches would:
(1) the same command without --batch, while the batch still runs: every prompt of the open
    batch it asks again is "paid twice" (it must call nothing and say how to go on);
(2) the provider finishes the batch (answering, and billing, each of its prompts), and the live
    command runs again: it must collect the batch, record every reply once, and ask live only
    what no batch holds.
Counted: live requests in (1) for prompts of the open batch; "paid twice": answers to those
prompts beyond the batch's own, over (1) and (2); batches left open at the end; logs
incomplete; reruns that failed.
"""

from __future__ import annotations

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

from openai_batch_server import BatchServer  # noqa: E402
from openai_server import Reply, user_text  # noqa: E402

KONKORD = [sys.executable, "-m", "konkord.cli"]
MODELS = ["openai/a", "openai/b", "openai/c"]
TASKS = 8
EXPECTED = {"run": ("answers", TASKS * len(MODELS)), "judge": ("verdicts", TASKS * 3 * 2)}


def responder(body: dict[str, Any], n: int) -> Reply:
    text = user_text(body)
    if "VERDICT" in text:
        return Reply(f"The first is tidier.\nVERDICT: {1 + n % 2}")
    return Reply(f"{body.get('model')}'s answer to {text[-24:]}")  # distinct per model


@dataclass
class BatchTally:
    trials: int = 0
    asked_while_open: int = 0  # live requests for prompts of the open batch, while it ran
    refused_while_open: int = 0
    paid_twice: int = 0  # answers to the open batch's prompts beyond the batch's own
    left_open: int = 0
    incomplete: list[str] = field(default_factory=list)
    failed_reruns: list[str] = field(default_factory=list)
    batch_prompts: int = 0


def _prompt(body: dict[str, Any]) -> str:
    return json.dumps([body.get("model"), body.get("messages")], sort_keys=True)


class BatchKills:
    def __init__(self) -> None:
        self.server = BatchServer(responder)
        self.server._httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.env = os.environ | {
            "PYTHONPATH": str(REPO),
            "OPENAI_API_KEY": "sk-harness-0000000000",
            "KONKORD_BACKOFF_BASE": "0.01",
            "KONKORD_BATCH_POLL": "0.05",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.tally = BatchTally()

    def args(self, stage: str) -> list[str]:
        if stage == "run":
            return ["run", "--suite", "s.yaml", "--models", ",".join(MODELS),
                    "--api-base", self.server.url]
        return ["judge", "--run", "s", "--judge", "openai/judge"]

    def call(self, root: Path, args: list[str]) -> int:
        return subprocess.run([*KONKORD, *args], cwd=root, env=self.env, capture_output=True,
                              text=True, timeout=300).returncode

    def project(self, stage: str) -> Path:
        root = Path(tempfile.mkdtemp(prefix="konkord-batch-kill-"))
        tasks = "\n".join(f"  - {{id: q{i}, prompt: Question number {i}?}}" for i in range(TASKS))
        (root / "s.yaml").write_text(f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}\n")
        if stage == "judge":
            self.server.hold = False
            assert self.call(root, self.args("run")) == 0, "answering live failed"
        return root

    def batch_prompts(self, first_batch: int) -> set[str]:
        """The prompts of every batch created since `first_batch`, read from its input file."""
        prompts = set()
        for body in self.server.batch_creates[first_batch:]:
            path = self.server.files[body["input_file_id"]]["path"]
            for line in Path(path).read_text().splitlines():
                if line.strip():
                    prompts.add(_prompt(json.loads(line)["body"]))
        return prompts

    def finish_batches(self) -> None:
        self.server.hold = False
        for batch_id, batch in list(self.server.batches.items()):
            while batch["status"] not in ("completed", "failed", "expired", "cancelled"):
                self.server._poll(batch_id)

    def trial(self, stage: str) -> None:
        root = self.project(stage)
        log = root / "runs" / "s" / "batches.jsonl"
        created = len(self.server.batch_creates)
        self.server.hold = True
        child = subprocess.Popen([*KONKORD, *self.args(stage), "--batch"], cwd=root, env=self.env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        deadline = time.monotonic() + 120
        while not (log.exists() and b'"submitted"' in log.read_bytes()):
            if child.poll() is not None or time.monotonic() > deadline:
                os.killpg(child.pid, signal.SIGKILL)
                self.tally.failed_reruns.append(f"{stage}: no batch was submitted")
                shutil.rmtree(root, ignore_errors=True)
                return
            time.sleep(0.02)
        time.sleep(random.uniform(0.0, 0.5))
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        self.tally.trials += 1
        in_batch = self.batch_prompts(created)
        self.tally.batch_prompts += len(in_batch)
        mark = len(self.server.requests)
        code = self.call(root, self.args(stage))  # (1) live, the batch still running
        asked = [_prompt(b) for b in self.server.requests[mark:]]
        self.tally.asked_while_open += sum(1 for p in asked if p in in_batch)
        self.tally.refused_while_open += code == 2 and not asked
        self.finish_batches()  # the provider ends the batch (answering each of its prompts)
        code = self.call(root, self.args(stage))  # (2) live again
        if code != 0:
            self.tally.failed_reruns.append(f"{stage}: live rerun exit {code}")
        # each prompt of the batch is paid once, by the batch; every other answer is a repeat
        answered = Counter(_prompt(b) for b in self.server.requests[mark:])
        self.tally.paid_twice += sum(n - 1 for p, n in answered.items() if p in in_batch)
        self.check(root, stage)
        shutil.rmtree(root, ignore_errors=True)

    def check(self, root: Path, stage: str) -> None:
        stream, expected = EXPECTED[stage]
        path = root / "runs" / "s" / f"{stream}.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        good = [r for r in records if r.get("error") is None and r.get("kind") != "failure"]
        if len(good) != expected:
            self.tally.incomplete.append(f"{stage}: {len(good)} of {expected} {stream}")
        batches = root / "runs" / "s" / "batches.jsonl"
        latest: dict[str, str] = {}
        for line in batches.read_text().splitlines() if batches.exists() else []:
            record = json.loads(line)
            latest[record["input_file_id"]] = record["status"]
        self.tally.left_open += sum(1 for s in latest.values() if s in ("uploaded", "submitted"))


def run_batch_kills(trials: int) -> BatchTally:
    kills = BatchKills()
    kills.server.start()
    try:
        for stage in ("run", "judge"):
            for _ in range(trials):
                kills.trial(stage)
            print(f"  batch-then-live kills during {stage}: done", flush=True)
    finally:
        kills.server.stop()
    return kills.tally


def print_tally(t: BatchTally) -> None:
    print(f"\nbatch then live: {t.trials} kills with a batch open ({t.batch_prompts} prompts in "
          "open batches)")
    print(f"  live rerun while the batch runs: refused, calling nothing, {t.refused_while_open} "
          f"of {t.trials}; requests for the open batch's prompts {t.asked_while_open}")
    print(f"  after a second live rerun once the batch ended: prompts paid twice {t.paid_twice}; "
          f"batches left open {t.left_open}")
    print(f"  logs incomplete: {len(t.incomplete)} {t.incomplete}")
    print(f"  reruns that did not finish cleanly: {len(t.failed_reruns)} {t.failed_reruns}")


if __name__ == "__main__":
    random.seed(13)
    print_tally(run_batch_kills(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
