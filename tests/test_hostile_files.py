"""Hostile files and paths: each gives one clear line (no traceback, no hang), nothing written.

Cases that cannot live in tests/data/bad_inputs (FIFOs, devices, symlinks, sparse files,
paths outside the project) are made here, in a scratch project, and given both to `validate`
and to the stages that read them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli

BAD = Path(__file__).parent / "data" / "bad_inputs"
GOOD_SUITE = (BAD / "ok" / "suite.yaml").read_text()


def run_cli(*args: str) -> tuple[int, str]:
    """`konkord ARGS` in-process: (exit code, what it printed to stderr)."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


def one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def hostile(project: Path, kind: str, name: str | None = None) -> Path:
    """A path of the given kind inside the project (named `name`, else after its kind)."""
    path = project / (name or f"{kind}.yaml")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink-loop":
        os.symlink(project / "other.yaml", path)
        os.symlink(path, project / "other.yaml")
    elif kind == "huge":
        with open(path, "wb") as handle:
            handle.truncate(101 * 1024 * 1024)  # sparse: no disk, but 101 MB to stat
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "dangling-symlink":
        os.symlink("gone.yaml", path)
    return path


MESSAGES = {
    "fifo": "is a named pipe (FIFO), expected a regular file",
    "directory": "is a directory, expected a file",
    "symlink-loop": "is a symlink loop, not a file",
    "huge": "is larger than 100 MB, the limit for a suite or runs file",
    "device": "is a device, expected a regular file",
    "dangling-symlink": "is a symlink to gone.yaml, which does not exist",
}

EVERY_STAGE = (
    ("validate", "runs.json"), ("report", "--run", "demo"), ("build", "--offline"),
    ("publish", "demo"), ("run", "--run", "demo"), ("judge", "--run", "demo"),
    ("label", "--run", "demo", "--no-browser"), ("calibrate", "--run", "demo"),
    ("check", "--run", "demo"), ("import", "mt-bench-human", "votes.jsonl", "--run", "other"),
)


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_a_hostile_suite_gives_one_line_to_run(project: Path, kind: str) -> None:
    path = hostile(project, kind)
    before = sorted(p.name for p in project.iterdir())
    code, stderr = run_cli("run", "--suite", path.name, "--models", "sim/a,sim/b")
    assert code == 2
    if kind == "device":  # a symlink to /dev/zero leaves the project before it is a device
        assert one_line_error(stderr) == (
            'error: --suite "device.yaml" is outside the project folder (through a symlink: it '
            "resolves to /dev/zero); use a path inside it"
        )
    else:
        assert one_line_error(stderr) == f"error: {path.name}: {MESSAGES[kind]}"
    assert sorted(p.name for p in project.iterdir()) == before


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_validate_gives_one_line_for_a_hostile_file_without_hanging(
    project: Path, kind: str
) -> None:
    path = hostile(project, kind)
    # validate reads a folder as a folder of suites
    message = MESSAGES[kind] if kind != "directory" else "a folder with no suite files (.yaml) in it"
    done = subprocess.run(
        [sys.executable, "-m", "konkord.cli", "validate", path.name],
        cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert one_line_error(done.stderr).endswith(message)


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_a_hostile_runs_json_stops_every_stage(project: Path, kind: str) -> None:
    hostile(project, kind, "runs.json")
    (project / "votes.jsonl").touch()
    for args in EVERY_STAGE[1:]:  # validate reads a folder as a folder of suites
        code, stderr = run_cli(*args)
        assert (code, one_line_error(stderr)) == (2, f"error: runs.json: {MESSAGES[kind]}"), args


def write_runs(project: Path, **fields: str) -> None:
    (project / "suites").mkdir(exist_ok=True)
    (project / "suites" / "ok.yaml").write_text(GOOD_SUITE)
    run = {"name": "demo", "suite": "suites/ok.yaml", "models": ["sim/a", "sim/b"], **fields}
    (project / "runs.json").write_text(json.dumps({"runs": [run]}, indent=2) + "\n")


def test_a_results_symlink_out_of_the_project_is_refused(project: Path, tmp_path_factory:
                                                         pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "victim.json"
    outside.write_text("precious")
    (project / "results").mkdir()
    os.symlink(outside, project / "results" / "demo.json")
    write_runs(project)
    code, stderr = run_cli("validate", "runs.json")
    assert code == 2
    line = one_line_error(stderr)
    assert line.startswith('error: runs.json:3: runs[0].results "results/demo.json" is outside '
                           "the project folder (through a symlink: it resolves to ")
    for args in (["report", "--run", "demo"], ["run", "--run", "demo"], ["build", "--offline"]):
        code, stderr = run_cli(*args)
        assert code == 2 and one_line_error(stderr) == line, args
    assert outside.read_text() == "precious"


def test_a_runs_folder_symlinked_out_of_the_project_is_refused(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    os.symlink(outside, project / "runs")
    write_runs(project)
    code, stderr = run_cli("run", "--run", "demo")
    assert code == 2
    assert one_line_error(stderr).startswith(
        'error: the run folder "runs/demo" is outside the project folder (through a symlink'
    )
    assert list(outside.iterdir()) == []


def test_paths_given_on_the_command_line_stay_inside(project: Path) -> None:
    write_runs(project)
    shutil.copy(project / "suites" / "ok.yaml", project.parent / "elsewhere.yaml")
    code, stderr = run_cli("run", "--suite", "../elsewhere.yaml", "--models", "sim/a,sim/b",
                           "--run", "away")
    assert code == 2
    assert one_line_error(stderr) == (
        'error: --suite "../elsewhere.yaml" is outside the project folder; use a path inside it'
    )
    code, stderr = run_cli("report", "--run", "demo", "--out", "/tmp/konkord-report.json")
    assert code == 2
    assert one_line_error(stderr) == (
        'error: --out "/tmp/konkord-report.json" is outside the project folder; '
        "use a path inside it"
    )
    code, stderr = run_cli("build", "--offline", "--out", "../site")
    assert code == 2
    assert one_line_error(stderr) == (
        'error: --out "../site" is outside the project folder; use a path inside it'
    )
    code, stderr = run_cli("serve", "--out", "../site")  # refused before it serves anything
    assert code == 2
    assert one_line_error(stderr) == (
        'error: --out "../site" is outside the project folder; use a path inside it'
    )
    code, stderr = run_cli("build", "--offline", "--out", ".")
    assert code == 2
    assert one_line_error(stderr) == (
        'error: --out "." is the project folder itself, not a path inside it'
    )
    assert not (project.parent / "site").exists()


def test_a_manifest_naming_a_suite_outside_is_refused(project: Path) -> None:
    (project / "runs" / "away").mkdir(parents=True)
    manifest = {"name": "away", "suite": "/etc/hostname", "models": ["sim/a", "sim/b"]}
    (project / "runs" / "away" / "run.json").write_text(json.dumps(manifest, indent=1) + "\n")
    code, stderr = run_cli("report", "--run", "away")
    assert code == 2
    assert one_line_error(stderr) == (
        'error: runs/away/run.json:3: suite "/etc/hostname" is outside the project folder; '
        "use a path inside it"
    )


def test_a_symlink_planted_in_the_run_or_site_folder_is_refused(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "victim.txt"
    outside.write_text("precious")
    write_runs(project)
    (project / "runs" / "demo").mkdir(parents=True)
    os.symlink(outside, project / "runs" / "demo" / "answers.jsonl")
    code, stderr = run_cli("run", "--run", "demo")
    assert code == 2
    assert one_line_error(stderr).startswith(
        'error: the run folder holds a symlink: "runs/demo/answers.jsonl" is outside the '
        "project folder (through a symlink"
    )
    (project / "runs" / "demo" / "answers.jsonl").unlink()
    (project / "public" / "demo").mkdir(parents=True)
    os.symlink(outside.parent, project / "public" / "demo" / "tasks")
    code, stderr = run_cli("build", "--offline")
    assert code == 2
    assert one_line_error(stderr).startswith(
        'error: --out holds a symlink: "public/demo/tasks" is outside the project folder'
    )
    assert outside.read_text() == "precious"


def test_a_fifo_in_the_run_folder_is_refused_instead_of_hanging(project: Path) -> None:
    write_runs(project)
    (project / "runs" / "demo").mkdir(parents=True)
    os.mkfifo(project / "runs" / "demo" / "answers.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "konkord.cli", "report", "--run", "demo"],
        cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert one_line_error(done.stderr) == (
        'error: the run folder holds "runs/demo/answers.jsonl", which is not a regular file'
    )



@pytest.mark.parametrize("escape", ["parent", "absolute", "symlink"])
def test_a_results_path_out_of_the_project_is_refused_by_every_stage(
    project: Path, tmp_path_factory: pytest.TempPathFactory, escape: str
) -> None:
    victim = tmp_path_factory.mktemp("outside") / "victim.json"
    victim.write_text("precious")
    results = {"parent": "../../etc/passwd", "absolute": str(victim),
               "symlink": "results/demo.json"}[escape]
    if escape == "symlink":
        (project / "results").mkdir()
        os.symlink(victim, project / "results" / "demo.json")
    write_runs(project, results=results)
    (project / "votes.jsonl").touch()
    through = f" (through a symlink: it resolves to {victim})" if escape == "symlink" else ""
    expected = (f'error: runs.json:10: runs[0].results "{results}" is outside the project '
                f"folder{through}; use a path inside it")
    before = sorted(str(p.relative_to(project)) for p in project.rglob("*"))
    for args in EVERY_STAGE:
        code, stderr = run_cli(*args)
        assert (code, one_line_error(stderr)) == (2, expected), args
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == before
    assert victim.read_text() == "precious"


def test_the_whole_bad_input_corpus_gives_one_line_each_and_no_traceback(project: Path) -> None:
    """Every bad input at once through one `konkord validate` process: a hang would time out,
    a traceback or a second line per file would show."""
    corpus = sorted(p for p in BAD.rglob("*") if p.is_file() and p.parent.name != "ok")
    made = [hostile(project, kind) for kind in sorted(MESSAGES)]
    special = [Path("/dev/zero"), Path("/proc/self/mem")]
    done = subprocess.run(
        [sys.executable, "-m", "konkord.cli", "validate", *map(str, corpus + made + special)],
        cwd=project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    errors = done.stderr.splitlines()
    assert (done.returncode, done.stdout) == (2, "")
    assert "Traceback" not in done.stderr
    # One line per file, but validate lists every problem: unknown_key.yaml and
    # unknown_top_key.yaml each have two (a misspelt field, and so a missing one).
    assert len(corpus) >= 48 and len(errors) == len(corpus + made + special) + 2, done.stderr
    named = {line.removeprefix("error: ").split(":")[0] for line in errors}
    assert named == {str(path) for path in corpus + made + special}, done.stderr
    assert all(line.startswith("error: ") for line in errors), done.stderr
    assert {"error: /dev/zero: is a device, expected a regular file",
            "error: /proc/self/mem: cannot be read (Input/output error)"} <= set(errors)


@pytest.mark.parametrize("planted", ["folder-symlink", "file-symlink", "a-file"])
def test_the_konkord_state_folder_stays_inside_for_every_stage_that_writes_it(
    project: Path, tmp_path_factory: pytest.TempPathFactory, planted: str
) -> None:
    """.konkord holds the response cache, the run locks and the build stamps: a symlink
    there would send every stage's writes out of the project."""
    outside = tmp_path_factory.mktemp("outside")
    write_runs(project)
    (project / "votes.jsonl").touch()
    if planted == "folder-symlink":
        os.symlink(outside, project / ".konkord")
        expected = ('error: the .konkord folder ".konkord" is outside the project folder '
                    f"(through a symlink: it resolves to {outside}); use a path inside it")
    elif planted == "file-symlink":
        (project / ".konkord" / "cache").mkdir(parents=True)
        os.symlink(outside / "victim", project / ".konkord" / "cache" / "responses.jsonl")
        expected = ('error: the .konkord folder holds a symlink: ".konkord/cache/responses.jsonl"'
                    " is outside the project folder (through a symlink: it resolves to "
                    f"{outside / 'victim'}); use a path inside it")
    else:
        (project / ".konkord").write_text("")
        expected = ('error: ".konkord" is not a folder; move it away, Konkord keeps its cache '
                    "and locks there")
    stages = [args for args in EVERY_STAGE if args[0] not in ("validate", "publish")]
    stages.append(("run", "--suite", "suites/ok.yaml", "--models", "sim/a,sim/b", "--run", "new"))
    for args in stages:
        code, stderr = run_cli(*args)
        assert (code, one_line_error(stderr)) == (2, expected), args
    assert list(outside.iterdir()) == []


def test_a_sibling_folder_sharing_the_projects_name_as_a_prefix_is_outside(
    tmp_path: Path,
) -> None:
    from konkord.evidence.paths import outside_problem

    project, evil = tmp_path / "proj", tmp_path / "proj-evil"
    project.mkdir()
    evil.mkdir()
    problem = outside_problem(Path("../proj-evil/results.json"), project)
    assert problem == '"../proj-evil/results.json" is outside the project folder; use a path inside it'
    (project / "link").symlink_to(evil)
    through = outside_problem(Path("link/results.json"), project)
    assert through is not None and "through a symlink" in through
    assert outside_problem(Path("results/r.json"), project) is None
