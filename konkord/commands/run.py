"""`konkord run`: ask every model for one answer per task."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click


@click.command()
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), help="Suite YAML file.")
@click.option("--models", help="Comma-separated litellm model names, e.g. gpt-4o-mini,sim/alpha.")
@click.option("--run", "run_name", help="Run name (default: the suite file's name). A run listed in runs.json supplies suite and models.")
@click.option("--concurrency", default=8, show_default=True, help="Parallel calls per model.")
@click.option("--max-tokens", type=int, help="Output token cap per answer [default: 4096].")
@click.option("--temperature", type=float, help="Sampling temperature [default: 0].")
@click.option("--seed", type=int, help="Sampling seed, where the provider supports one [default: 0].")
@click.option("--api-base", help="Base URL of an OpenAI-compatible server (for local models).")
@click.option("--force", is_flag=True, help="Regenerate answers even if recorded (pays again).")
def run(
    suite_path: Path | None,
    models: str | None,
    run_name: str | None,
    concurrency: int,
    max_tokens: int | None,
    temperature: float | None,
    seed: int | None,
    api_base: str | None,
    force: bool,
) -> None:
    """Ask every model for one answer per task, saving each answer as it arrives.

    Resumable: a rerun makes no call for answers already recorded and retries
    the ones that failed. Responses are cached under .konkord/cache. Credentials
    come from the environment or a .env file in this directory.
    """
    from dataclasses import replace

    from konkord.errors import KonkordError
    from konkord.evidence import EvidenceLog
    from konkord.llm import CallSettings, ModelClient
    from konkord.progress import progress_bar
    from konkord.runspec import RunSpec, resolve_run, write_manifest
    from konkord.stages.run import generate_answers
    from konkord.suite import load_suite

    spec: RunSpec | None = None
    name = run_name or (suite_path.stem if suite_path else None)
    if name is None:
        raise KonkordError("give --suite PATH --models A,B (or --run NAME of a run in runs.json)")
    try:
        spec = resolve_run(name)
    except KonkordError:
        if suite_path is None or not models:
            raise
    if spec is None or (suite_path and not spec.in_runs_file):
        if suite_path is None or not models:
            raise KonkordError("give --suite PATH and --models A,B for a run not in runs.json")
        spec = RunSpec(
            name=name,
            suite_path=suite_path,
            suite=load_suite(suite_path),
            models=tuple(m.strip() for m in models.split(",") if m.strip()),
            results_path=Path(f"results/{name}.json"),
        )
    if models and spec.in_runs_file:
        spec = replace(spec, models=tuple(m.strip() for m in models.split(",") if m.strip()))
    settings = CallSettings(
        temperature=temperature if temperature is not None else spec.settings.temperature,
        max_tokens=max_tokens or spec.settings.max_tokens,
        seed=seed if seed is not None else spec.settings.seed,
        api_base=api_base or spec.settings.api_base,
    )
    spec = replace(spec, settings=settings)
    if len(spec.models) < 2:
        raise KonkordError("--models needs at least two models to compare")
    if not spec.in_runs_file:
        write_manifest(spec)

    log = EvidenceLog(spec.run_dir)
    client = ModelClient(concurrency=concurrency, prices=spec.prices)
    total = len(spec.suite.tasks) * len(spec.models)
    click.echo(f"run {spec.name}: {len(spec.suite.tasks)} tasks x {len(spec.models)} models", err=True)
    with progress_bar("answers", total) as advance:
        summary = asyncio.run(
            generate_answers(
                log,
                spec.suite,
                spec.models,
                settings,
                client,
                force=force,
                on_done=advance,
                on_total=lambda todo: advance(total - todo),
            )
        )
    cost = f"${summary.cost_usd:.4f}"
    if summary.unknown_price_models:
        cost += f" + unknown (no price for {', '.join(sorted(summary.unknown_price_models))})"
    click.echo(
        f"generated {summary.generated}, cached {summary.cached}, already recorded "
        f"{summary.already_recorded}, failed {summary.failed}; cost {cost}"
    )
    for line in summary.failures[:10]:
        click.secho(f"  failed: {line}", fg="red", err=True)
    if summary.failed:
        click.echo("rerun the same command to retry the failures", err=True)
        raise SystemExit(1)
