"""The fresh-machine test (issue 8): the README's first command, on a clean clone, with no key and
no way to reach a model provider, builds the whole demo site.

The clone is made with `git clone` from this repository's HEAD, so it holds exactly what a
newcomer gets: no public/, no .venv, no .env, no uncommitted results. It sits next to a link to
../shared so relative paths hold. The README's first fenced `sh` block is run with bash, word for
word, with every provider credential and Konkord/litellm setting removed from the environment.

Network: pip must reach PyPI, so the guard in tests/netguard/sitecustomize.py applies to the
`konkord` program (and what it starts) only. It records every attempt to reach a non-loopback
address and refuses it; the test fails on any recorded attempt, even one the caller swallowed.
The guard tests below prove that it does refuse and record, through the real `konkord` too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag
from conftest import REPO, SHARED

NETGUARD = Path(__file__).resolve().parent / "netguard"
LOG_ENV = "KONKORD_NETGUARD_LOG"
EXAMPLE_SUITES = ("python_codegen.yaml", "support_replies.yaml")
TEST_NET = "203.0.113.1"  # TEST-NET-3 (RFC 5737): never routed; the guard refuses before connecting

# Environment variables a fresh machine does not have: provider credentials and endpoints, and
# any Konkord or litellm setting (LITELLM_LOCAL_MODEL_COST_MAP included: Konkord must set it
# itself, or litellm fetches its cost map from the network at import).
CREDENTIAL_MARKERS = ("API_KEY", "APIKEY", "API_BASE", "BASE_URL", "TOKEN", "SECRET", "ACCESS_KEY",
                      "CREDENTIALS", "PASSWORD")
PROVIDER_PREFIXES = (
    "OPENAI", "ANTHROPIC", "AZURE", "AWS_", "GEMINI", "GOOGLE", "VERTEX", "OPENROUTER", "MISTRAL",
    "COHERE", "GROQ", "TOGETHER", "DEEPSEEK", "XAI_", "HF_", "HUGGINGFACE", "FIREWORKS",
    "REPLICATE", "PERPLEXITY", "ANYSCALE", "OLLAMA", "DATABRICKS", "WATSONX", "CLOUDFLARE",
    "VOYAGE", "NVIDIA", "LITELLM", "KONKORD",
)
PYTHON_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONNOUSERSITE",
               "VIRTUAL_ENV", "CONDA_PREFIX", "__PYVENV_LAUNCHER__")

PCT = r"(\d+(?:\.\d+)?)%"
INTERVAL = re.compile(rf"^{PCT} \({PCT} to {PCT}\)$")
PROPORTION = re.compile(rf"^{PCT} \({PCT} to {PCT}\), (\d+) of (\d+)$")


# -- helpers -----------------------------------------------------------------------------------


def readme_main_command(readme: str) -> str:
    """The README's first fenced shell block, exactly as written (the "main job")."""
    match = re.search(r"^```(?:sh|bash|shell)[ \t]*\n(.*?)^```", readme, re.M | re.S)
    assert match, "README.md has no fenced sh block"
    return match.group(1)


def is_fresh_machine_var(name: str) -> bool:
    """False for a variable a newcomer's machine would not have set for Konkord."""
    upper = name.upper()
    if upper in PYTHON_VARS or upper.startswith(PROVIDER_PREFIXES):
        return False
    return not any(marker in upper for marker in CREDENTIAL_MARKERS)


def guarded_env(log: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment as a fresh machine has it, with the network guard installed."""
    env = {k: v for k, v in (base or dict(os.environ)).items() if is_fresh_machine_var(k)}
    if sys.prefix != sys.base_prefix:  # leave the dev venv off PATH: the README makes its own
        venv_bin = str(Path(sys.prefix) / "bin")
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin
        )
    env["PYTHONPATH"] = str(NETGUARD)
    env[LOG_ENV] = str(log)
    return env


def net_attempts(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def clean_clone(workspace: Path) -> Path:
    """A clone of this repository's HEAD beside a link to ../shared, as a newcomer lays it out."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout of the repository")
    dest = workspace / REPO.name
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(dest)], check=True)
    if SHARED.exists():
        (workspace / SHARED.name).symlink_to(SHARED, target_is_directory=True)
    for absent in (".venv", "public", ".env", ".konkord"):
        assert not (dest / absent).exists(), f"a clean clone should not hold {absent}"
    return dest


def last_lines(text: str, n: int) -> list[str]:
    """The last n lines of a command's output, without pip's index warnings (noise here)."""
    return [line for line in text.splitlines() if not line.startswith("WARNING: ")][-n:]


def html_pages(public: Path) -> list[Path]:
    return sorted(public.rglob("*.html"))


def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def interval_bounds(text: str) -> tuple[float, float, float]:
    """(estimate, low, high) of a rendered "41.2% (30.1% to 52.3%)", or a failed assertion."""
    match = INTERVAL.match(text.strip())
    assert match, f"not an estimate with a 95% interval: {text!r}"
    estimate, low, high = (float(g) for g in match.groups())
    assert low <= estimate <= high, text
    return estimate, low, high


def assert_agreement_with_interval(text: str, where: str) -> None:
    """A rendered proportion "78.0% (70.1% to 84.3%), 78 of 100" with a real interval."""
    match = PROPORTION.match(" ".join(text.split()))
    assert match, f"{where}: agreement without an interval: {text!r}"
    rate, low, high = (float(g) for g in match.groups()[:3])
    k, n = int(match.group(4)), int(match.group(5))
    assert n > 0 and 0 <= k <= n, f"{where}: {text!r}"
    assert low <= rate <= high and low < high, f"{where}: {text!r}"


def cell_text(row: Tag, selector: str) -> str:
    """The text of the one element `selector` picks in a table row (a failed assertion if none)."""
    cell = row.select_one(selector)
    assert cell is not None, f"no {selector} in {row}"
    return cell.get_text(" ", strip=True)


def definition(section: Tag, term: str) -> str | None:
    """The <dd> text after the <dt> whose text is `term`, within a section."""
    for dt in section.find_all("dt"):
        if dt.get_text(strip=True) == term:
            dd = dt.find_next_sibling("dd")
            return dd.get_text(" ", strip=True) if dd else None
    return None


# -- the network guard -------------------------------------------------------------------------

PROBE = """
import asyncio, json, socket, subprocess, sys

out = {}

def attempt(name, fn):
    try:
        fn()
        out[name] = "connected"
    except OSError as exc:
        out[name] = "refused" if "netguard" in str(exc) else "error: %r" % (exc,)

def tcp():
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM)

attempt("connect", lambda: tcp().connect((TARGET, 9)))
attempt("connect_ex", lambda: tcp().connect_ex((TARGET, 9)))
attempt("create_connection", lambda: socket.create_connection((TARGET, 9), timeout=1))
attempt("getaddrinfo", lambda: socket.getaddrinfo("provider.example", 443))
attempt("udp_sendto", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", (TARGET, 9)))
attempt("asyncio", lambda: asyncio.run(asyncio.open_connection(TARGET, 9)))
attempt("ssl_http", lambda: __import__("urllib.request").request.urlopen("https://%s:9/" % TARGET, timeout=1))

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
attempt("loopback", lambda: socket.create_connection(listener.getsockname(), timeout=5).close())
attempt("localhost_lookup", lambda: socket.getaddrinfo("localhost", 80))
a, b = socket.socketpair()
out["unix"] = "connected" if a.family == socket.AF_UNIX else "?"
child = subprocess.run(
    [sys.executable, "-c", "import socket\\ntry:\\n socket.create_connection((%r, 9), timeout=1)\\n"
     "except OSError as e:\\n print('refused' if 'netguard' in str(e) else repr(e))" % TARGET],
    capture_output=True, text=True,
)
out["child"] = child.stdout.strip() or child.stderr.strip()
print(json.dumps(out))
"""


def run_probe(tmp_path: Path, program_name: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Run the probe as a script called `program_name` under the guard; outcomes and the log."""
    script = tmp_path / program_name
    script.write_text(f"TARGET = {TEST_NET!r}\n" + textwrap.dedent(PROBE))
    log = tmp_path / "net.jsonl"
    done = subprocess.run(
        [sys.executable, str(script)],
        env=guarded_env(log),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), net_attempts(log)


def test_guard_refuses_and_records_every_outbound_attempt(tmp_path: Path) -> None:
    outcomes, attempts = run_probe(tmp_path, "konkord")
    outbound = ("connect", "connect_ex", "create_connection", "getaddrinfo", "udp_sendto",
                "asyncio", "ssl_http", "child")
    for name in outbound:
        assert outcomes[name] == "refused", (name, outcomes[name])
    for name in ("loopback", "localhost_lookup", "unix"):
        assert outcomes[name] == "connected", (name, outcomes[name])
    addresses = " ".join(a["address"] for a in attempts)
    assert "provider.example" in addresses
    assert addresses.count(TEST_NET) >= len(outbound) - 1  # all but the lookup name the address
    assert {a["call"] for a in attempts} >= {"connect", "connect_ex", "create_connection",
                                             "getaddrinfo", "sendto"}
    assert "127.0.0.1" not in addresses and "localhost" not in addresses
    assert len({a["pid"] for a in attempts}) == 2  # the child process was guarded as well


def test_guard_leaves_other_programs_alone(tmp_path: Path) -> None:
    """pip in the same command must keep its network: only `konkord` is guarded."""
    log = tmp_path / "net.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", "import _socket, socket; print(socket.socket.connect is "
         "_socket.socket.connect, socket.getaddrinfo.__module__)"],
        env=guarded_env(log),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["True", "socket"]
    assert net_attempts(log) == []


def test_fresh_env_has_no_credentials_and_installs_the_guard(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "HOME": "/root", "OPENAI_API_KEY": "sk-x", "MY_SERVICE_TOKEN": "t",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "KONKORD_TIMEOUT": "1", "AWS_REGION": "x",
            "ANTHROPIC_API_KEY": "k", "PYTHONPATH": "/elsewhere", "PIP_FIND_LINKS": "/w"}
    env = guarded_env(tmp_path / "log", base)
    assert set(env) == {"PATH", "HOME", "PIP_FIND_LINKS", "PYTHONPATH", LOG_ENV}
    assert env["PYTHONPATH"] == str(NETGUARD)


@pytest.mark.slow
def test_real_konkord_is_guarded(tmp_path: Path) -> None:
    """The installed `konkord` program, asked to reach a provider, is refused and it is recorded."""
    konkord = Path(sys.executable).parent / "konkord"
    if not konkord.exists():
        pytest.skip("the konkord console script is not installed beside this Python")
    (tmp_path / "probe.yaml").write_text(
        "name: probe\nrubric: Prefer the more helpful answer.\ntasks:\n"
        "  - id: hello\n    prompt: Say hello.\n"
    )
    log = tmp_path / "net.jsonl"
    env = guarded_env(log)
    env["OPENAI_API_KEY"] = "sk-netguard-probe"
    done = subprocess.run(
        [str(konkord), "run", "--suite", "probe.yaml", "--models", "openai/guard-a,openai/guard-b",
         "--run", "probe", "--api-base", f"http://{TEST_NET}:9/v1", "--retries", "0",
         "--timeout", "10"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    attempts = net_attempts(log)
    assert any(TEST_NET in a["address"] for a in attempts), (attempts, done.stdout, done.stderr)
    answers = [json.loads(line) for line in
               (tmp_path / "runs" / "probe" / "answers.jsonl").read_text().splitlines()]
    assert answers and all(a["error"] and not a["text"] for a in answers), answers


# -- the fresh machine -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The README's main job on a clean clone with no key and no provider network, run once."""
    workspace = tmp_path_factory.mktemp("fresh")
    clone = clean_clone(workspace)
    command = readme_main_command((clone / "README.md").read_text(encoding="utf-8"))
    log = workspace / "net.jsonl"
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=clone,
        env=guarded_env(log),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    yield {"clone": clone, "command": command, "done": done, "log": log}


def spec(listed: str | dict[str, str]) -> str:
    """A model as runs.json lists it: its spec, or {"model": spec, "name": display name}."""
    return listed["model"] if isinstance(listed, dict) else listed


def shown(listed: str | dict[str, str]) -> str:
    """The name the pages show for a listed model: its display name, else its spec."""
    return listed.get("name", listed["model"]) if isinstance(listed, dict) else listed


def demo_runs(clone: Path) -> list[dict[str, Any]]:
    """The runs of the shipped runs.json that use simulated models (the demo runs)."""
    entries: list[dict[str, Any]] = json.loads((clone / "runs.json").read_text())["runs"]
    return [e for e in entries if any(spec(m).startswith("sim/") for m in e["models"])]


@pytest.mark.slow
def test_readme_main_job_on_a_fresh_machine(fresh_build: dict[str, Any]) -> None:
    done: subprocess.CompletedProcess[str] = fresh_build["done"]
    tail = "\n".join([*last_lines(done.stdout, 20), "--- stderr ---", *last_lines(done.stderr, 30)])
    assert done.returncode == 0, f"{fresh_build['command']!r} exited {done.returncode}:\n{tail}"
    attempts = net_attempts(fresh_build["log"])
    assert attempts == [], f"konkord tried to reach the network: {attempts}"
    assert (fresh_build["clone"] / "public" / "index.html").is_file()


@pytest.mark.slow
def test_demo_leaderboards_list_the_sim_models_with_intervals(
    fresh_build: dict[str, Any],
) -> None:
    clone: Path = fresh_build["clone"]
    if fresh_build["done"].returncode != 0:
        pytest.fail("the README's main job failed; see test_readme_main_job_on_a_fresh_machine")
    runs = demo_runs(clone)
    suites = {Path(e["suite"]).name for e in runs}
    assert set(EXAMPLE_SUITES) <= suites, f"a demo run for each example suite; got {suites}"
    index = soup(clone / "public" / "index.html")
    # Links name the page (`run/index.html`) so the site also works from disk.
    linked = {
        str(a.get("href", "")).removesuffix("index.html").rstrip("/")
        for a in index.select("table.runs a[href]")
    }
    for entry in runs:
        name = entry["name"]
        assert name in linked, f"run {name} is not listed on the index page"
        page = clone / "public" / name / "index.html"
        sections = soup(page).select("section.judge")
        assert sections, f"{page}: no judge section"
        assert len(sections) == len(entry.get("judges", [])), page
        sim_models = [shown(m) for m in entry["models"] if spec(m).startswith("sim/")]
        for section in sections:
            rows = {
                cell_text(row, "td.model"): row
                for row in section.select("table.leaderboard:not(.style-table) tbody tr")
            }
            for model in sim_models:
                assert model in rows, f"{page}: {model} missing from the leaderboard ({list(rows)})"
                _, low, high = interval_bounds(cell_text(rows[model], "td.winrate"))
                assert low < high, f"{page}: {model} has a degenerate interval"


@pytest.mark.slow
def test_demo_calibration_shows_agreement_with_its_interval(fresh_build: dict[str, Any]) -> None:
    clone: Path = fresh_build["clone"]
    if fresh_build["done"].returncode != 0:
        pytest.fail("the README's main job failed; see test_readme_main_job_on_a_fresh_machine")
    for entry in demo_runs(clone):
        name = entry["name"]
        leaderboard = clone / "public" / name / "index.html"
        for section in soup(leaderboard).select("section.judge"):
            block = section.select_one("div.calibration-block")
            assert block is not None and "uncalibrated" not in block.get_attribute_list("class"), (
                f"{leaderboard}: judge block not calibrated by the simulated labels"
            )
            text = definition(block, "Agreement with people")
            assert text is not None, f"{leaderboard}: no agreement figure"
            assert_agreement_with_interval(text, str(leaderboard))
        calibration = clone / "public" / name / "calibration" / "index.html"
        sections = soup(calibration).select("section.judge")
        assert sections, f"{calibration}: no judge section"
        for section in sections:
            # Whatever the layout, each judge's section says how often people agreed with it,
            # with the interval and the counts behind it.
            text = definition(section, "Agreement with people")
            assert text is not None, f"{calibration}: no agreement with people (uncalibrated?)"
            assert_agreement_with_interval(text, str(calibration))


@pytest.mark.slow
def test_every_demo_page_carries_the_simulated_banner(fresh_build: dict[str, Any]) -> None:
    clone: Path = fresh_build["clone"]
    if fresh_build["done"].returncode != 0:
        pytest.fail("the README's main job failed; see test_readme_main_job_on_a_fresh_machine")
    pages = html_pages(clone / "public")
    run_pages = [p for e in demo_runs(clone) for p in pages if p.is_relative_to(
        clone / "public" / e["name"])]
    assert len(run_pages) >= 4 * len(demo_runs(clone)), "run pages missing"
    missing = [str(p.relative_to(clone)) for p in pages if not soup(p).select("p.banner.simulated")]
    assert missing == [], f"pages without the simulated-run banner: {missing}"
