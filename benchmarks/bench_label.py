"""How long the labeller takes to answer a key: from the key press to the next item on screen.

Drives the real `konkord label` (a Streamlit server) with headless Chromium, as the label tests
do, on a run of 40 tasks x 3 models (120 comparisons, 60 to label) whose answers are a few
paragraphs with a code block. For each key (1, 2, t in turn) it times the press until the page
shows the new count and the rerun is fully drawn (no element left stale). Beside it, the anchor
measured in the same rounds: a bare Streamlit app with one button on the same kind of key
shortcut, whose click only counts (Streamlit's own round trip, which no app can beat).
Aim: under 0.15 s to the next item.

    python benchmarks/bench_label.py [--keys 20] [--repeats 3]

Needs streamlit, playwright and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from label_fixtures import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    kill_group,
    make_run,
    start_label_app,
)

WAIT_MS = 60_000
BARE_APP = """
import streamlit as st
if "n" not in st.session_state:
    st.session_state.n = 0
def bump():
    st.session_state.n += 1
st.progress(0.5, text=f"{st.session_state.n} of 1000 counted")
st.markdown(f"Item {st.session_state.n}")
st.button("Next", key="next", shortcut="1", on_click=bump)
"""


def answer(task_id: str, index: int) -> str:
    """A realistic answer: prose, a list and a fenced code block."""
    prose = " ".join(f"Sentence {k} about {task_id} from variant {index}." for k in range(12))
    code = "\n".join(f"    total += value_{k} * {index + k}" for k in range(15))
    return (
        f"{prose}\n\n- first point\n- second point\n\n```python\ndef solve():\n"
        f"    total = 0\n{code}\n    return total\n```\n\n{prose}"
    )


NO_STALE = "() => document.querySelectorAll('[data-stale=\"true\"]').length === 0"


def press_and_wait(page: Any, key: str, text: str) -> float:
    """Seconds from a key press until `text` is on the page and the rerun it started is fully
    drawn (Streamlit marks the elements of the previous run stale until they are redrawn)."""
    started = time.perf_counter()
    page.keyboard.press(key)
    page.get_by_text(text).wait_for(timeout=WAIT_MS)
    page.wait_for_function(NO_STALE, timeout=WAIT_MS, polling="raf")
    return time.perf_counter() - started


def konkord_label(browser: Any, root: Path, n_keys: int) -> list[float]:
    make_run(root, n_tasks=40, answer_text=answer)
    port = free_port()
    app = start_label_app(root, "demo", port, "--n", "60", "--seed", "0", "--labeller", "ann")
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/")
        page.get_by_text("0 of 60 labelled").wait_for(timeout=WAIT_MS)
        # The shortcuts answer once the buttons are drawn; a key pressed before is lost.
        page.get_by_role("button", name="Answer 1 better").wait_for(timeout=WAIT_MS)
        page.wait_for_function(NO_STALE, timeout=WAIT_MS, polling="raf")
        keys = [("1", "2", "t")[k % 3] for k in range(n_keys)]
        return [
            press_and_wait(page, key, f"{done} of 60 labelled")
            for done, key in enumerate(keys, start=1)
        ]
    finally:
        kill_group(app)


def bare_streamlit(browser: Any, root: Path, n_keys: int) -> list[float]:
    script = root / "bare_app.py"
    script.write_text(BARE_APP)
    port = free_port()
    app = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
         "--server.headless", "true", "--server.address", "127.0.0.1",
         "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
         "--client.toolbarMode", "minimal"],
        cwd=root, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        for _ in range(600):
            try:
                page.goto(f"http://127.0.0.1:{port}/")
                break
            except Exception:
                time.sleep(0.1)
        page.get_by_text("0 of 1000 counted").wait_for(timeout=WAIT_MS)
        page.get_by_role("button", name="Next").wait_for(timeout=WAIT_MS)
        page.wait_for_function(NO_STALE, timeout=WAIT_MS, polling="raf")
        return [press_and_wait(page, "1", f"Item {done}") for done in range(1, n_keys + 1)]
    finally:
        kill_group(app)


def summary(times: list[float]) -> str:
    return (
        f"median {statistics.median(times) * 1000:.0f} ms, p90 "
        f"{sorted(times)[int(0.9 * (len(times) - 1))] * 1000:.0f} ms, range "
        f"{min(times) * 1000:.0f}-{max(times) * 1000:.0f} ms"
    )


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20, help="keys timed per round")
    parser.add_argument("--repeats", type=int, default=3, help="rounds, each in a fresh app")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    ours: list[list[float]] = []
    bare: list[list[float]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(args.repeats):  # interleaved, so both see the same machine load
                with tempfile.TemporaryDirectory() as tmp:
                    cwd = os.getcwd()
                    os.chdir(tmp)
                    try:
                        ours.append(konkord_label(browser, Path(tmp), args.keys))
                        bare.append(bare_streamlit(browser, Path(tmp), args.keys))
                    finally:
                        os.chdir(cwd)
        finally:
            browser.close()
    medians = [statistics.median(o) / statistics.median(b) for o, b in zip(ours, bare, strict=True)]
    print(
        f"konkord label, key to next item ({args.keys} keys x {args.repeats} rounds): "
        f"{summary([t for r in ours for t in r])} (aim < 150 ms)"
    )
    print(
        f"bare Streamlit button, key to rerun (anchor, same rounds): "
        f"{summary([t for r in bare for t in r])}"
    )
    print(
        f"konkord / anchor, per round's medians: median {statistics.median(medians):.2f}x, "
        f"range {min(medians):.2f}-{max(medians):.2f}x"
    )


if __name__ == "__main__":
    main()
