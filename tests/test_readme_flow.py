"""The README followed to the letter: every `sh` block, in order, in a copy of the project,
offline, and then the site builds with every run the README made.

Nothing is called on the internet. `gpt-4o-mini` is answered by the local OpenAI-compatible
server (tests/openai_server.py, reached through OPENAI_API_BASE, as a user's proxy would be);
the Anthropic and Gemini names, which need their providers' own APIs, are swapped for
simulated models. `konkord label` opens a browser app, so its step is driven through
Streamlit's AppTest, clicking the app's own buttons. Installing (venv, pip) and the test
command itself are the only lines not run: tests/test_fresh_machine.py covers installing.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FAKE_KEY, SHARED
from openai_server import OpenAIServer, Reply

ROOT = Path(__file__).resolve().parent.parent
PROJECT_FILES = (
    "README.md",
    ".env.example",
    "runs.json",
    "suites",
    "runs",
    "results",
    "templates",
    "content",
)
# Names whose providers speak their own APIs: the local server cannot stand in for them.
SWAPPED = {
    "claude-haiku-4-5": "sim/haiku:strength=0.4",
    "gemini/gemini-2.5-flash": "sim-judge/flash:accuracy=0.8,tie_rate=0.1",
}
LABELS = 5
NOT_RUN = (
    re.compile(r"^python3 -m venv \S+$"),
    re.compile(r"^(\.venv/bin/)?pip install .*$"),
    re.compile(r"^\.venv/bin/python -m pytest .*$"),
    re.compile(r"^echo .*$"),
)


def readme_commands(text: str) -> list[str]:
    """Every command of every ```sh block, in order: `&&` chains split, comments dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)\n```", text, re.DOTALL):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            commands.extend(part.strip() for part in line.split("&&") if part.strip())
    return commands


def write_small_mtbench(folder: Path) -> None:
    """A few rows in the published labels-only format, for a clone without the shared data."""
    folder.mkdir(parents=True)
    models = ["alpha-7b", "beta-13b", "gamma-70b"]
    human, gpt4 = [], []
    for question in (81, 82, 83, 84):
        for turn in (1, 2):
            for i, a in enumerate(models):
                for b in models[i + 1 :]:
                    row = {"model_a": a, "model_b": b, "question_id": question, "turn": turn}
                    winner = "model_b" if (question + turn) % 3 else "tie"
                    gpt4.append({**row, "judge": "gpt4_pair", "winner": winner})
                    for expert in (0, 1):
                        won = winner if expert == 0 else "model_b"
                        human.append({**row, "judge": f"expert_{expert}", "winner": won})
    for name, rows in (("human.jsonl", human), ("gpt4_pair.jsonl", gpt4)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def label_in_the_app(project: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """`konkord label --run NAME`: a person clicks through a few comparisons."""
    run = args[args.index("--run") + 1]
    monkeypatch.chdir(project)
    monkeypatch.setenv("KONKORD_LABEL_RUN", run)
    monkeypatch.setenv("KONKORD_LABEL_LABELLER", "reader")
    monkeypatch.setenv("KONKORD_LABEL_N", str(LABELS))
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(ROOT / "konkord" / "stages" / "label" / "app.py"), default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    for click in range(LABELS):
        app.button(key=("choice_1", "choice_2", "choice_tie")[click % 3]).click().run()
        assert not app.exception, app.exception
    return LABELS


def test_every_readme_block_runs_in_order_and_the_site_builds(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("streamlit")
    openai_server.responder = lambda body, n: Reply("```python\ndef solve():\n    return None\n```")
    project = tmp_path / "konkord"
    project.mkdir()
    for name in PROJECT_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name)
        else:
            shutil.copy2(source, project / name)
    # Fewer tasks, same steps: the flow is under test here, not the volume.
    suite = project / "suites" / "python_codegen.yaml"
    parsed = yaml.safe_load(suite.read_text())
    parsed["tasks"] = parsed["tasks"][:6]
    suite.write_text(yaml.safe_dump(parsed, sort_keys=False))
    # The published MT-Bench files are ../shared/data/... beside a clone (tests/test_mtbench.py
    # imports them in full); a few rows in their format keep this test fast and clone-only.
    write_small_mtbench(tmp_path / SHARED.name / "data" / "mtbench_human_judgments")
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_API_BASE"))}
    env.update(
        PYTHONPATH=str(ROOT),
        OPENAI_API_KEY=FAKE_KEY,
        OPENAI_API_BASE=openai_server.url,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        KONKORD_BACKOFF_BASE="0.01",
    )

    ran, labelled = [], 0
    for command in readme_commands((project / "README.md").read_text()):
        if any(pattern.match(command) for pattern in NOT_RUN):
            continue
        for real, stand_in in SWAPPED.items():
            command = command.replace(real, stand_in)
        words = shlex.split(command)
        if words[0] in ("konkord", ".venv/bin/konkord"):
            args = [
                arg
                for word in words[1:]
                for arg in (sorted(glob.glob(word, root_dir=project)) if "*" in word else [word])
            ]
            if args[0] == "label":
                labelled += label_in_the_app(project, args, monkeypatch)
                ran.append(command)
                continue
            argv = [sys.executable, "-m", "konkord.cli", *args]
        else:
            argv = words
        done = subprocess.run(
            argv, cwd=project, env=env, capture_output=True, text=True, check=False, timeout=300
        )
        assert done.returncode == 0, f"README step `{command}` failed:\n{done.stderr[-3000:]}"
        assert "Build failed" not in done.stdout + done.stderr
        if command.startswith("konkord report --run mt-bench-human"):
            # An imported run owes the verdicts it holds, not zero of them.
            assert not re.search(r"verdicts \d+/0\b", done.stdout), done.stdout
        ran.append(command)

    assert ran[0] == "konkord build" or ran[0].endswith("konkord build")
    assert any(c.startswith("konkord run ") for c in ran)
    assert any(c.startswith("konkord import ") for c in ran)
    assert labelled == LABELS
    assert ran.index("konkord publish mt-bench-human") < len(ran) - 1 - ran[::-1].index(
        "konkord build"
    ), "the README never builds after publishing"
    runs = [entry["name"] for entry in json.loads((project / "runs.json").read_text())["runs"]]
    assert {"mine", "mt-bench-human"} <= set(runs)
    for run in runs:
        for page in ("index.html", "calibration/index.html", "tasks/index.html"):
            assert (project / "public" / run / page).is_file(), f"{run}/{page} was not built"
    calibration = json.loads((project / "results" / "mine.json").read_text())
    assert calibration["judge_blocks"][0]["calibration"]["status"] != "uncalibrated"
    assert len(openai_server.requests) > 0
