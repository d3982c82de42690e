"""The publishing files: the deploy workflow builds offline and deploys public/ only with secrets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def test_wrangler_config_serves_public_as_static_assets() -> None:
    text = (REPO / "wrangler.jsonc").read_text()
    config = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))
    assert config["assets"]["directory"] == "./public"
    assert config["assets"]["not_found_handling"] == "404-page"
    assert "main" not in config, "no Worker code: plain static assets"


def test_deploy_workflow_builds_offline_and_skips_cleanly_without_secrets() -> None:
    workflow = yaml.safe_load((REPO / ".github/workflows/deploy.yml").read_text())
    assert workflow[True]["push"]["branches"] == ["main"]  # YAML reads the key `on` as True
    job = workflow["jobs"]["deploy"]
    assert job["env"]["CLOUDFLARE_API_TOKEN"] == "${{ secrets.CLOUDFLARE_API_TOKEN }}"
    steps = job["steps"]
    assert any(step.get("run") == "konkord build --offline --out public" for step in steps)
    deploy = next(
        s for s in steps if str(s.get("uses", "")).startswith("cloudflare/wrangler-action@")
    )
    skip = next(s for s in steps if "::notice" in str(s.get("run", "")))
    assert deploy["if"] == "env.CLOUDFLARE_API_TOKEN != '' && env.CLOUDFLARE_ACCOUNT_ID != ''"
    assert skip["if"] == "env.CLOUDFLARE_API_TOKEN == '' || env.CLOUDFLARE_ACCOUNT_ID == ''"
    assert deploy["with"]["command"] == "deploy"


def test_ci_workflow_runs_the_ci_script() -> None:
    workflow = yaml.safe_load((REPO / ".github/workflows/ci.yml").read_text())
    steps = workflow["jobs"]["test"]["steps"]
    assert {"run": "bash .ci/run"} in steps
