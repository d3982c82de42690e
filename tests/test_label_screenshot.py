"""The labelling app at laptop sizes in headless Chromium: answers side by side, buttons on screen.

Writes PNG screenshots for a person to look at: into $KONKORD_SCREENSHOT_DIR when set,
else into the test's tmp directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from label_fixtures import (
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    kill_group,
    make_run,
    start_label_app,
)

pytest.importorskip("streamlit")
sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs chromium"),
]

WAIT_MS = 60_000
LAPTOPS = [(1440, 900), (1366, 768)]


RUBRIC = """Judge each answer as a careful reviewer of a pull request would, in this order:

1. Correctness. Does the code do what the task asks for ordinary inputs, with the exact
   name, parameters and return type given? Trace at least one example by hand.
2. The edge cases the task names: empty inputs, boundaries, invalid input that must raise.
3. Clarity. Readable names, no dead code, type hints that match the signature.

Do not reward length: an answer that is correct and plain beats one that is elaborate."""


def typical_prompt(index: int) -> str:
    """About the size of a task prompt in the example suite: four or five lines."""
    return (
        "Write `def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]`\n"
        "that merges overlapping closed intervals and returns them sorted by start. Intervals\n"
        "that only touch, such as (1, 2) and (2, 3), overlap. An empty list gives an empty\n"
        f"list; an interval whose start is after its end raises ValueError (case {index}).\n"
    )


def typical_answer(task_id: str, index: int) -> str:
    """About what a model writes for a small coding task: a sentence, 20 lines of code, a note."""
    body = "\n".join(
        [
            "def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:",
            '    """Merge overlapping closed intervals; the result is sorted."""',
            "    if not intervals:",
            "        return []",
            "    ordered = sorted(intervals)",
            "    merged = [ordered[0]]",
            "    for start, end in ordered[1:]:",
            "        last_start, last_end = merged[-1]",
            f"        if start <= last_end + {index % 2}:",
            "            merged[-1] = (last_start, max(last_end, end))",
            "        else:",
            "            merged.append((start, end))",
            "    return merged",
            "",
            "",
            "assert merge_intervals([(1, 3), (2, 6), (8, 10)]) == [(1, 6), (8, 10)]",
            "assert merge_intervals([]) == []",
        ]
    )
    return (
        f"Sort by start, then sweep once, extending the last interval while they overlap "
        f"({task_id}, variant V{index}).\n\n```python\n{body}\n```\n\n"
        "This runs in **O(n log n)** time because of the sort, and O(n) extra space."
    )


def test_laptop_screenshot(project: Path, tmp_path: Path) -> None:
    make_run(project, n_tasks=6, answer_language="python", answer_text=typical_answer,
             prompt=typical_prompt, rubric=RUBRIC)
    out_dir = Path(os.environ.get("KONKORD_SCREENSHOT_DIR") or tmp_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    app = start_label_app(project, "demo", port, "--n", "10", "--labeller", "ann")
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for width, height in LAPTOPS:
                    page = browser.new_page(viewport={"width": width, "height": height})
                    page.goto(f"http://127.0.0.1:{port}/")
                    page.get_by_text("0 of 10 labelled").wait_for(timeout=WAIT_MS)
                    page.locator(".st-key-answer_2 [data-testid='stCode']").wait_for(
                        timeout=WAIT_MS
                    )
                    page.screenshot(path=str(out_dir / f"label-{width}x{height}.png"))

                    one = page.locator(".st-key-answer_1").bounding_box()
                    two = page.locator(".st-key-answer_2").bounding_box()
                    assert one is not None and two is not None
                    assert abs(one["y"] - two["y"]) < 2, "answers are not side by side"
                    assert two["x"] >= one["x"] + one["width"], "answers overlap"
                    assert one["width"] > width * 0.25 and one["height"] > 200
                    for label in ("Answer 1 better", "Answer 2 better", "About equal", "Skip",
                                  "Undo"):
                        box = page.get_by_role("button", name=label).bounding_box()
                        assert box is not None, label
                        assert box["y"] >= 0 and box["y"] + box["height"] <= height, (
                            f"{label} is below the fold at {width}x{height}"
                        )
                    assert page.get_by_text("0 of 10 labelled").is_visible()
                    page.close()
            finally:
                browser.close()
    finally:
        kill_group(app)
