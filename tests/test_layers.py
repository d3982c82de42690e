"""The layers of konkord/ are kept by import-linter, and the import graph has no circles and
no private names reached across modules (issue 23)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from import_audit import ROOT, circles, graph

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter's own command on a project folder (its pyproject.toml, its konkord/)."""
    if not LINT_IMPORTS.exists():
        pytest.skip(f"{LINT_IMPORTS} is missing: pip install -e '.[dev]'")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(project), "HOME": str(project)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(project / "pyproject.toml"), "--no-cache"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )


def test_contracts_hold_on_the_repository() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("module", "upward", "contract"),
    [
        # stats is pure: a statistic that reaches for the evidence log breaks the layers
        ("stats/pairs.py", "from konkord.evidence.log import EvidenceLog", "Statistics are pure"),
        # the site renders the results file; it never talks to a model
        ("site/svg.py", "from konkord.providers.llm import ModelClient", "The site renders"),
        # a lower stage never imports a higher one
        ("stages/run.py", "from konkord.stages.report.report import build_results", "Stages:"),
        # configuration describes a run; it never reaches up to the stages that carry it out
        ("configuration/runspec.py", "from konkord.stages.run import answer_messages", "Layers:"),
    ],
)
def test_an_upward_import_planted_in_a_copy_breaks_a_contract(
    tmp_path: Path, module: str, upward: str, contract: str
) -> None:
    shutil.copytree(ROOT / "konkord", tmp_path / "konkord",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "konkord" / module
    target.write_text(target.read_text() + f"\n\ndef _planted() -> None:\n    {upward}  # noqa\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0, done.stdout
    planted = "konkord." + module.removesuffix(".py").replace("/", ".")
    assert planted in done.stdout, done.stdout
    verdicts = [line for line in done.stdout.splitlines() if line.startswith(contract)]
    assert verdicts and verdicts[0].rstrip().endswith("BROKEN"), done.stdout


def test_no_circles_and_no_private_imports_across_modules() -> None:
    g = graph()
    assert circles(g.edges) == []
    assert g.private == []


def test_the_audit_sees_a_circle_and_a_private_import(tmp_path: Path) -> None:
    """The counter itself can fail: a planted circle and a planted private import are found."""
    package = tmp_path / "konkord"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from konkord.b import _hidden\n")
    (package / "b.py").write_text("def f() -> None:\n    from konkord import a\n_hidden = 1\n")
    g = graph(package)
    assert circles(g.edges) == [["konkord.a", "konkord.b"]]
    assert g.private == [("konkord.a", "konkord.b", "_hidden")]
