"""Kill -9 during `konkord label`: labels lost, torn lines, sessions that did not resume.

    python benchmarks/kill_label.py --kills 6     # also run by kill_harness.py --label N

Drives the real labelling app (a Streamlit server) with headless Chromium and its keyboard
shortcuts. Each trial presses a random number of keys, waiting for each label to be shown as
counted (the count changes only after the record was fsynced: the label is "submitted"), then
presses one more and kills the whole process group at a random moment after it, so some kills
land while that label is being written. Half of the trials instead kill the Streamlit server
with strace at its write to labels.jsonl (the label half written, or not at all).

After each kill: every label shown as counted is in the log ("lost" otherwise); the log reads
with at most a torn last line (cut away and kept on the next append); a new session shows as
many labels done as the log holds, and its next label lands once.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from label_fixtures import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    kill_group,
    make_run,
    start_label_app,
)

from konkord.evidence.log import EvidenceLog, TornLineWarning, record_key  # noqa: E402
from konkord.stages.label.labels import current_labels  # noqa: E402

N = 12  # labels asked for per session
WAIT_MS = 90_000
STRACE = shutil.which("strace")


@dataclass
class LabelTally:
    kills: int = 0
    strace_kills: int = 0
    submitted: int = 0  # labels shown as counted before a kill
    lost: int = 0  # of those, missing from the log after the kill
    torn_tails: int = 0  # logs left with half a label (repaired on the next append)
    not_fired: int = 0  # strace kills that did not land within a minute (killed by hand)
    not_resumed: list[str] = field(default_factory=list)


def _labels(root: Path) -> tuple[int, bool]:
    """Labels standing in the log, and whether its last line is torn."""
    log = EvidenceLog(root / "runs" / "demo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        torn = log.read("labels").torn
        return len(current_labels(log)), torn


def _project() -> Path:
    root = Path(tempfile.mkdtemp(prefix="konkord-label-kill-"))
    here = Path.cwd()
    os.chdir(root)
    try:
        make_run(root, n_tasks=30)
    finally:
        os.chdir(here)
    return root


def _open(browser: Any, port: int, done: int) -> Any:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"http://127.0.0.1:{port}/")
    page.get_by_text(f"{done} of {N} labelled").wait_for(timeout=WAIT_MS)
    return page


def _attach_strace(root: Path, app: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """strace attached to the running Streamlit server: SIGKILL at its next write to the
    labels file. Attached late because strace counts calls per thread, and Streamlit runs
    each rerun of the page in a new thread: when=N from the start would never reach N."""
    assert STRACE is not None
    server = _streamlit_pids(app)[0]
    labels = (root / "runs" / "demo" / "labels.jsonl").resolve()
    labels.touch()  # -P matches an existing path
    tracer = subprocess.Popen(
        [STRACE, "-f", "-qq", "-o", os.devnull, "-e", "trace=write",
         "-e", "inject=write:signal=KILL:when=1", "-P", str(labels), "-p", str(server)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # attached once the kernel names a tracer
        status = Path(f"/proc/{server}/status").read_text()
        if "TracerPid:\t0\n" not in status:
            return tracer
        time.sleep(0.05)
    raise RuntimeError("strace did not attach to the labelling server")


def trial(browser: Any, tally: LabelTally, use_strace: bool) -> None:
    root = _project()
    try:
        presses = random.randint(1, 6)
        port = free_port()
        app = start_label_app(root, "demo", port, "--n", str(N), "--seed", "0",
                              "--labeller", "ann")
        confirmed = 0
        try:
            page = _open(browser, port, 0)
            for done in range(1, presses):
                page.keyboard.press(random.choice("12t"))
                page.get_by_text(f"{done} of {N} labelled").wait_for(timeout=WAIT_MS)
                confirmed = done
            if use_strace:  # the kill lands at the write of the last label
                tracer = _attach_strace(root, app)
                page.keyboard.press(random.choice("12t"))
                deadline = time.monotonic() + 60
                while _streamlit_pids(app) and time.monotonic() < deadline:
                    time.sleep(0.05)
                tally.not_fired += bool(_streamlit_pids(app))
                tracer.kill()
                tracer.wait()
            else:
                killer = threading.Timer(random.uniform(0.0, 0.4), kill_group, (app,))
                page.keyboard.press(random.choice("12t"))
                killer.start()
                killer.join()
        finally:
            kill_group(app)
        tally.kills += 1
        tally.strace_kills += use_strace
        tally.submitted += confirmed
        standing, torn = _labels(root)
        tally.lost += max(0, confirmed - standing)
        tally.torn_tails += torn
        # a new session resumes where the log is, and its next label lands once
        port = free_port()
        app = start_label_app(root, "demo", port, "--n", str(N), "--seed", "0",
                              "--labeller", "ann")
        try:
            page = _open(browser, port, standing)
            page.keyboard.press("2")
            page.get_by_text(f"{standing + 1} of {N} labelled").wait_for(timeout=WAIT_MS)
        except Exception as exc:  # any failure here is the figure
            tally.not_resumed.append(f"after {confirmed} labels: {type(exc).__name__}")
        finally:
            kill_group(app)
        log = EvidenceLog(root / "runs" / "demo")
        keys = Counter(record_key("labels", r) for r in log.records("labels"))
        if len(current_labels(log)) != standing + 1 or max(keys.values()) > 1:
            tally.not_resumed.append(f"after {confirmed} labels: the log has {dict(keys)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _streamlit_pids(app: subprocess.Popen[bytes]) -> list[int]:
    """The Streamlit server processes of the app's group still alive."""
    found = subprocess.run(["pgrep", "-g", str(app.pid), "-f", "streamlit"],
                           capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def run_label_kills(kills: int) -> LabelTally:
    """`kills` trials, every other one by strace at the label's write when strace is there."""
    from playwright.sync_api import sync_playwright

    tally = LabelTally()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for n in range(kills):
                trial(browser, tally, use_strace=bool(STRACE) and n % 2 == 1)
                print(f"  label kill {n + 1}: lost so far {tally.lost}", flush=True)
        finally:
            browser.close()
    return tally


def print_tally(tally: LabelTally) -> None:
    print(f"label kills: {tally.kills} ({tally.strace_kills} by strace at the label's write, "
          f"{tally.not_fired} of them never fired)")
    print(f"labels shown as counted before the kill: {tally.submitted}; lost: {tally.lost}")
    print(f"logs left with a torn last label (cut away on the next append): {tally.torn_tails}")
    print(f"sessions that did not resume cleanly: {len(tally.not_resumed)} {tally.not_resumed}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--seed", type=int, default=13)
    options = parser.parse_args()
    random.seed(options.seed)
    print_tally(run_label_kills(options.kills))


if __name__ == "__main__":
    main()
