"""`wrangler deploy --dry-run` accepts the demo site as `konkord build --offline` writes it, and
refuses a file over Cloudflare's 25 MiB limit (so the dry run is a real check, not a no-op).

It runs offline in about a second. Skipped, saying why, where wrangler is not installed: set
KONKORD_WRANGLER to its path, or have `wrangler` on PATH or in the repository's node_modules.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures_site import DEMO_FOLDERS, build_project_site

REPO = Path(__file__).resolve().parent.parent


def find_wrangler() -> str | None:
    candidates = [
        os.environ.get("KONKORD_WRANGLER"),
        shutil.which("wrangler"),
        str(REPO / "node_modules" / ".bin" / "wrangler"),
    ]
    return next((c for c in candidates if c and Path(c).is_file()), None)


def dry_run(wrangler: str, root: Path, assets: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "WRANGLER_SEND_METRICS": "false",  # no network: nothing is sent anywhere
        "CI": "1",
        "XDG_CONFIG_HOME": str(root / "config"),  # wrangler's logs stay in the test's folder
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [wrangler, "deploy", "--dry-run", "--assets", str(assets)],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def test_wrangler_dry_run_accepts_the_demo_site_and_refuses_a_file_over_25_mib(
    tmp_path: Path,
) -> None:
    wrangler = find_wrangler()
    if wrangler is None:
        pytest.skip("wrangler is not installed (set KONKORD_WRANGLER to its path)")
    for folder in DEMO_FOLDERS:
        shutil.copytree(REPO / folder, tmp_path / folder)
    shutil.copy(REPO / "runs.json", tmp_path / "runs.json")
    shutil.copy(REPO / "wrangler.jsonc", tmp_path / "wrangler.jsonc")
    build_project_site(tmp_path)
    public = tmp_path / "public"

    done = dry_run(wrangler, tmp_path, public)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--dry-run: exiting now." in done.stdout
    assert f"from the assets directory {public}" in done.stdout

    with open(public / "huge.bin", "wb") as huge:  # sparse: 26 MiB on paper, nothing on disk
        huge.truncate(26 * 2**20)
    refused = dry_run(wrangler, tmp_path, public)
    assert refused.returncode != 0
    assert "Asset too large" in refused.stdout + refused.stderr
    assert "huge.bin" in refused.stdout + refused.stderr
