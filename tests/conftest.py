"""Shared fixtures: a local OpenAI-compatible server, and a scratch project directory."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from openai_server import OpenAIServer

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FAKE_KEY = "sk-konkord-test-KEY-7d1f0c9a"

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
SCREENSHOTS = pytest.StashKey[Path]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runapi", action="store_true", help="run tests that call real providers")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runapi"):
        return
    skip = pytest.mark.skip(reason="calls a real provider; pass --runapi to run")
    for item in items:
        if "runapi" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started local OpenAI-compatible server; set `.responder` to script its replies."""
    server = OpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working directory with a fake API key set; stages write relative to it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    return tmp_path


CHROMIUM = Path("/usr/bin/chromium")  # Debian's; the browser tests skip without it


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium for the site's browser tests, told not to reach the network itself."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def screenshot_dir(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Where browser tests keep screenshots for a person to look at: $KONKORD_SCREENSHOT_DIR, else
    `screenshots/` in this session's pytest temporary folder (pytest keeps the last three). The
    folder is printed at the end of the session."""
    folder = Path(
        os.environ.get("KONKORD_SCREENSHOT_DIR") or tmp_path_factory.getbasetemp() / "screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    request.config.stash[SCREENSHOTS] = folder
    return folder


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    folder = config.stash.get(SCREENSHOTS, None)
    if folder is not None:
        count = len(list(folder.glob("*.png")))
        terminalreporter.write_line(f"screenshots ({count}) kept in {folder}")
