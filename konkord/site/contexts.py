"""Each run page's context: what the leaderboard, methodology and calibration templates
show, computed here so templates only format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from konkord.results.schema import JudgeBlock, Results, TurnRating
from konkord.site.anchored_svg import anchored_plot
from konkord.site.cascade_svg import selective_plot
from konkord.site.environment import METHODOLOGY_CONTENT, ContentFile
from konkord.site.markdown import render_markdown
from konkord.site.style_svg import style_plot
from konkord.site.svg import ForestRow, forest_plot, heatmap


def site_nav(content: Mapping[str, ContentFile]) -> list[dict[str, str]]:
    """Links to the content pages (about...), shown on every page."""
    return [
        {"slug": f.slug, "title": f.title}
        for f in content.values()
        if f.name != METHODOLOGY_CONTENT
    ]


def run_header(results: Results) -> dict[str, Any]:
    """What every page of a run names: the run, judge(s), suite, evidence date, versions."""
    return {
        "run": results.run,
        "suite": results.suite,
        "judges": results.judges,
        "date": results.evidence_date or "no evidence date",
        "konkord_version": results.konkord_version,
        "simulated": results.simulated,
        "schema_version": results.schema_version,
    }


def judge_sections(results: Results) -> list[dict[str, Any]]:
    """One entry per judge: its block and the id other pages link to."""
    return [
        {"block": block, "id": f"judge-{index + 1}", "number": index + 1}
        for index, block in enumerate(results.judge_blocks)
    ]


def turn_plot(block: JudgeBlock, order: list[str]) -> Markup | None:
    """Each model's win rate against the field in each turn, with the turn's own 95% interval:
    a model's turns on neighbouring rows (in the whole ranking's order), so a model that
    falls back in a later turn shows it at a glance. None without ranked turns."""
    ranked = [line for line in block.by_turn if line.ratings]
    if not ranked:
        return None
    by_model = {
        line.turn: {r.model: r for r in line.ratings} for line in ranked
    }
    rows = []
    for number, model in enumerate(order):
        for line in ranked:
            rating = by_model[line.turn].get(model)
            if rating is None:
                continue
            share = rating.win_rate_vs_field
            rows.append(
                ForestRow(
                    f"{model}, turn {line.turn} (rank {rank_text(rating)})",
                    share.estimate,
                    share.low,
                    share.high,
                    number + 1,
                )
            )
    return forest_plot(
        rows, f"Expected win rate against the field per turn, 95% intervals, judge {block.judge}"
    )


def rank_text(rating: TurnRating) -> str:
    """A rank range as the leaderboard writes it: "2", "1–3", or "none"."""
    if rating.rank_best is None or rating.rank_worst is None:
        return "none"
    if rating.rank_best == rating.rank_worst:
        return str(rating.rank_best)
    return f"{rating.rank_best}–{rating.rank_worst}"


def _leaderboard_section(results: Results, block: JudgeBlock) -> dict[str, Any]:
    costs = {line.who: line for line in results.cost if line.role == "generation"}
    group_sizes: dict[int, int] = {}
    for rating in block.ratings:
        group_sizes[rating.rank_group] = group_sizes.get(rating.rank_group, 0) + 1
    style = block.style
    controlled = {r.model: r for r in style.judge.ratings} if style is not None else {}
    rows = [
        {
            "rating": rating,
            "tied": group_sizes[rating.rank_group] > 1,
            "cost": costs.get(rating.model),
            "style": controlled.get(rating.model),
        }
        for rating in block.ratings
    ]
    forest = forest_plot(
        [
            ForestRow(
                r.model,
                r.win_rate_vs_field.estimate,
                r.win_rate_vs_field.low,
                r.win_rate_vs_field.high,
                r.rank_group,
            )
            for r in block.ratings
        ],
        f"Expected win rate against the field, 95% intervals, judge {block.judge}",
    )
    order = [r.model for r in block.ratings]
    turns = turn_plot(block, order)
    above = {(p.model_i, p.model_j) for p in block.pairwise if p.separated}
    grid = heatmap(
        order,
        block.p_above_matrix,
        f"P(row model above column model), judge {block.judge}",
        [[(a, b) in above for b in order] for a in order],
    )
    judge_cost = [
        line for line in results.cost if line.role == "judge" and line.who == block.route_name
    ]
    anchored = block.anchored
    return {
        "anchored_plot": anchored_plot(
            block.ratings, anchored.ratings, f"Judge alone and anchored to people, {block.judge}"
        ) if anchored is not None and anchored.status == "anchored" else None,
        "style_plot": style_plot(
            style.coefficients, f"Style coefficients of judge {block.judge} and of people"
        ) if style is not None and any(c.judge is not None for c in style.coefficients) else None,
        "rows": rows,
        "forest": forest,
        "turn_plot": turns,
        "heatmap": grid,
        "order": order,
        "judge_cost": judge_cost[0] if judge_cost else None,
    }


# What each check the suite can declare measures, said under the table for the ones it has.
CHECK_MEANINGS = {
    "compiles": "the answer's code parses and compiles as Python (it is not run)",
    "ruff_clean": "ruff's default rules find nothing in the code",
    "mypy_clean": "mypy reports no error in the code",
    "tests": "the task's own tests pass when run on the answer's code in a sandbox",
}


def checks_table(results: Results) -> dict[str, Any] | None:
    """Executed checks as one row per model (in the first judge's rank order, else as listed)
    and one column per check, so a model's record reads across and a check's down."""
    if not results.pass_rates:
        return None
    checks = list(dict.fromkeys(p.check for p in results.pass_rates))
    ranked = [r.model for r in results.judge_blocks[0].ratings] if results.judge_blocks else []
    models = list(dict.fromkeys([*ranked, *results.models, *(p.model for p in results.pass_rates)]))
    cells = {(p.model, p.check): p for p in results.pass_rates}
    rows = [
        {"model": model, "cells": [cells.get((model, check)) for check in checks]}
        for model in models
        if any((model, check) in cells for check in checks)
    ]
    meanings = [(check, CHECK_MEANINGS[check]) for check in checks if check in CHECK_MEANINGS]
    return {"checks": checks, "rows": rows, "meanings": meanings}


def closest_to_people(results: Results) -> JudgeBlock | None:
    """The calibrated judge whose agreement with people has the highest point estimate (the
    first such on a tie), or None when no judge is calibrated."""
    rates = [
        (b.calibration.agreement.rate, -index, b)
        for index, b in enumerate(results.judge_blocks)
        if b.calibration.agreement is not None and b.calibration.agreement.rate is not None
    ]
    return max(rates, key=lambda entry: entry[:2], default=(0.0, 0, None))[2]


def leaderboard_context(results: Results) -> dict[str, Any]:
    """The run's first judge in full, the others folded under a one-line summary each: the
    first is the one the runs index and the checks table rank by, so the page agrees with them."""
    sections = judge_sections(results)
    for section in sections:
        section.update(_leaderboard_section(results, section["block"]))
        ratings = section["block"].ratings
        section["ahead"] = ratings[0] if ratings and ratings[0].comparisons else None
    return {
        "sections": sections,
        "closest": closest_to_people(results),
        "pass_rates": results.pass_rates,
        "checks_table": checks_table(results),
        "cost": results.cost,
        "results_href": f"results/{results.run}.json",
    }


def distinct_prompts(results: Results) -> list[dict[str, Any]]:
    """Each distinct recorded judge prompt once, with the judges that were sent it (judges
    share a prompt when they judged with the same frame: the suite's rubric and Konkord's
    framing); judges with no recorded prompt come last, as one entry with no text."""
    groups: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    for section in judge_sections(results):
        block = section["block"]
        key = (block.system_prompt, block.frame_hash if block.system_prompt else None)
        group = groups.setdefault(
            key, {"text": block.system_prompt, "frame_hash": block.frame_hash, "judges": []}
        )
        group["judges"].append(section)
    return sorted(groups.values(), key=lambda g: g["text"] is None)


def shared_methods(results: Results) -> tuple[list[str], list[dict[str, Any]]]:
    """How the figures were made: the sentences every judge shares, once, and per judge the
    sentences of its own (its label counts, its fits)."""
    sections = judge_sections(results)
    lists = [list(s["block"].methods) for s in sections]
    common = [m for m in lists[0] if all(m in other for other in lists[1:])] if lists else []
    own = [
        {**section, "methods": [m for m in methods if m not in common]}
        for section, methods in zip(sections, lists, strict=True)
    ]
    return common, own


def distinct_styles(results: Results) -> list[dict[str, Any]]:
    """Each distinct style-control method once, with the judges whose rankings it controlled."""
    groups: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    for section in judge_sections(results):
        style = section["block"].style
        if style is None:
            continue
        key = (style.method, tuple(style.feature_rules))
        group = groups.setdefault(
            key, {"method": style.method, "feature_rules": style.feature_rules, "judges": []}
        )
        group["judges"].append(section)
    return list(groups.values())


def methodology_context(results: Results, content: Mapping[str, ContentFile]) -> dict[str, Any]:
    prose = content.get(METHODOLOGY_CONTENT)
    common, own = shared_methods(results)
    prompts = distinct_prompts(results)
    rubric = results.suite.rubric.strip()
    return {
        "sections": own,
        "prompts": prompts,
        # every judge's recorded prompt holds the rubric word for word: it is printed there
        "rubric_in_prompts": bool(prompts)
        and bool(rubric)
        and all(p["text"] and rubric in p["text"] for p in prompts),
        "common_methods": common,
        "styles": distinct_styles(results),
        "prose": render_markdown(prose.text) if prose else None,
    }


def calibration_context(results: Results) -> dict[str, Any]:
    from konkord.site.calibration_page import calibration_sections

    sections = judge_sections(results)
    headline = calibration_sections(results, sections)
    for section in sections:
        cascade = section["block"].cascade
        section["cascade_plot"] = (
            selective_plot(cascade.selective, cascade.accept_at, "Cascade: share decided and agreement")
            if cascade is not None and cascade.labels
            else None
        )
    return {"sections": sections, "headline": headline, "routes": results.routes}
