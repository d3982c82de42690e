"""kill -9 of the labelling app loses nothing: labels given before the kill are in the log.

Drives the real `konkord label` (a Streamlit server) with headless Chromium and its keyboard
shortcuts, kills the whole process group with SIGKILL, and starts it again.
"""

from __future__ import annotations

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

from konkord.evidence.log import EvidenceLog
from konkord.stages.label.labels import current_labels
from konkord.stages.label.sample import label_queue, pool_for_run

pytest.importorskip("streamlit")
sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs chromium"),
]

WAIT_MS = 60_000


def test_kill_9_loses_no_label_and_the_next_session_resumes(project: Path) -> None:
    spec = make_run(project, n_tasks=25)
    log = EvidenceLog(spec.run_dir)
    queue = label_queue(pool_for_run(spec, log), {}, "ann", 0, 10).items
    args = ("--n", "10", "--seed", "0", "--labeller", "ann")
    keys = ["1", "2", "t", "1", "3"]

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            port = free_port()
            app = start_label_app(project, "demo", port, *args)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_text("0 of 10 labelled").wait_for(timeout=WAIT_MS)
                for done, key in enumerate(keys, start=1):
                    page.keyboard.press(key)
                    # The page shows the new count only after the label's callback returned,
                    # that is after the record was fsynced: the label is "submitted".
                    page.get_by_text(f"{done} of 10 labelled").wait_for(timeout=WAIT_MS)
            finally:
                kill_group(app)

            labels = current_labels(log)
            assert len(labels) == len(keys)
            for item, key in zip(queue, keys, strict=False):
                record = labels[item.comparison.label_key("ann")]
                want = {"1": item.shown_first, "2": item.shown_second}.get(key, "tie")
                assert record["winner"] == want
                assert record["shown_first"] == item.shown_first

            port = free_port()
            app = start_label_app(project, "demo", port, *args)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_text(f"{len(keys)} of 10 labelled").wait_for(timeout=WAIT_MS)
                next_task = queue[len(keys)].comparison.task_id
                page.get_by_text(f"Task {next_task}", exact=True).wait_for(timeout=WAIT_MS)
                page.keyboard.press("2")
                page.get_by_text(f"{len(keys) + 1} of 10 labelled").wait_for(timeout=WAIT_MS)
            finally:
                kill_group(app)
        finally:
            browser.close()
    assert len(current_labels(log)) == len(keys) + 1
    assert len(log.records("labels")) == len(keys) + 1
