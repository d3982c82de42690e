"""The family-wise bar in the results file (issue 29): written beside each pair and in the
bootstrap block, said in the claims and methods, and absent from older files without harm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO

from konkord.results.schema import read_results
from konkord.stages.calibrate.methods import captions, method_sentences


def test_the_demo_results_say_when_the_family_wise_bar_withholds_a_claim() -> None:
    block = read_results(REPO / "results" / "demo-conversations.json").judge_blocks[0]
    assert len(block.bootstrap.family_factors) >= 1
    factor = block.bootstrap.family_factors[-1]
    assert factor > 1.0
    withheld = [
        p for p in block.pairwise if p.interval_excludes_zero and not p.family_excludes_zero
    ]
    assert withheld and not any(p.separated for p in withheld)
    lines = [c.text for c in block.claims if c.kind == "not_separated"]
    assert any(f"but not when widened {factor:.2f}-fold" in line for line in lines)
    assert any("chance of any wrong claim" in m for m in block.methods)
    assert f"widened {factor:.2f}-fold" in block.captions["rank"]


def test_an_older_results_file_still_reads_and_states_its_per_pair_rule(tmp_path: Path) -> None:
    data = json.loads((REPO / "results" / "demo-python-codegen.json").read_text())
    for block in data["judge_blocks"]:
        del block["bootstrap"]["family_factors"]
        for pair in block["pairwise"]:
            del pair["family_excludes_zero"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    block = read_results(path).judge_blocks[0]
    assert block.bootstrap.family_factors == []
    assert all(p.family_excludes_zero is None for p in block.pairwise)
    rank_caption = captions(block, 29)["rank"]
    assert "interval of their difference excludes 0 and an exact sign test" in rank_caption
    assert "widened" not in " ".join(method_sentences(block, 29))


@pytest.mark.parametrize("name", ["demo-python-codegen", "demo-support-replies"])
def test_every_claimed_pair_clears_the_family_wise_bar(name: str) -> None:
    for block in read_results(REPO / "results" / f"{name}.json").judge_blocks:
        for pair in block.pairwise:
            if pair.separated:
                assert pair.interval_excludes_zero and pair.family_excludes_zero
