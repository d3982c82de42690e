"""Which client a stage gets: live, through deployments, in batches, under a budget.

Stages only call `client.complete()`; the options of `run` and `judge` decide here how replies
are fetched, so every reply still goes through the stage's own parsing and evidence records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from konkord.errors import KonkordError

if TYPE_CHECKING:
    from konkord.configuration.runspec import RunSpec
    from konkord.providers.llm import ModelClient


def check_options(spec: RunSpec, models: tuple[str, ...], batch: bool) -> None:
    """Refuse, before anything is sent, what --batch and the deployments cannot do together."""
    if batch:
        from konkord.providers.batch_format import route_for

        for model in models:
            if model in spec.deployments:
                raise KonkordError(
                    f"--batch: {model} has several deployments in runs.json; a batch goes to "
                    "one server, so run it without --batch (the Router spreads live calls)"
                )
            route_for(model, spec.settings.api_base)
    if spec.deployments:
        from konkord.providers.deployments import Deployments

        missing = Deployments(spec.deployments).missing_keys()
        if missing:
            raise KonkordError(
                f"run {spec.name}: the deployments in runs.json need {', '.join(missing)}; set "
                "them in the shell or in a .env file in this directory; nothing was called"
            )


def make_client(
    spec: RunSpec,
    *,
    batch: bool = False,
    max_cost: float | None = None,
    concurrency: int = 8,
    retries: int = 4,
    timeout: float | None = None,
    on_status: Callable[[str], None] | None = None,
    models: tuple[str, ...] | None = None,
) -> ModelClient:
    """The client for one stage of `spec`'s run, with the options given on the command line.

    Batches an earlier `--batch` process left open are dealt with first (see
    settle_open_batches); `models` are those the stage will call (None: any)."""
    from konkord.evidence.log import EvidenceLog
    from konkord.providers.llm import ModelClient

    client: ModelClient
    log = EvidenceLog(spec.run_dir)
    if batch:
        from konkord.providers.batch import BatchClient

        client = BatchClient(
            max_retries=retries, prices=spec.prices, log=log, on_status=on_status
        )
    else:
        client = ModelClient(concurrency=concurrency, max_retries=retries, prices=spec.prices)
    if timeout is not None:
        client.timeout_s = timeout
    if spec.deployments and not batch:
        from konkord.providers.deployments import Deployments

        client.deployments = Deployments(spec.deployments)
    if max_cost is not None:
        from konkord.providers.budget import Budget, spent_in_evidence

        client.budget = Budget(
            cap_usd=max_cost,
            prices=spec.prices,
            spent_before_usd=spent_in_evidence(log),
            batch=batch,
        )
    settle_open_batches(client, spec, models, on_status)
    return client


def settle_open_batches(
    client: ModelClient,
    spec: RunSpec,
    models: tuple[str, ...] | None,
    on_status: Callable[[str], None] | None = None,
) -> None:
    """Before a stage calls anything, collect the batches an earlier --batch process left open,
    so no prompt they hold is paid for again.

    A batch client waits for each to end (as it always did, but now also when the stage has
    nothing left to ask). A live client reads each status once: a batch that has ended is
    collected and its replies served to the stage first; one still running for a model the
    stage calls stops the command, saying how to collect or cancel it."""
    from konkord.evidence.log import EvidenceLog
    from konkord.providers.batch import BatchClient
    from konkord.providers.batch_resume import open_batches

    log = EvidenceLog(spec.run_dir)
    if not open_batches(log):
        return
    import asyncio

    if isinstance(client, BatchClient):
        asyncio.run(client.collect_open_batches(wait=True))
        return
    helper = BatchClient(
        log=log, prices=spec.prices, cache_dir=client.cache_dir, on_status=on_status,
        max_retries=client.max_retries, timeout_s=client.timeout_s,
    )
    running = asyncio.run(helper.collect_open_batches(wait=False))
    client.collected.update(helper.collected)
    for record in running:
        held = [str(m) for m in record.get("models") or []]
        if models is None or set(held) & set(models):
            batch_id = record["batch_id"]
            raise KonkordError(
                f"run {spec.name}: batch {batch_id} ({record.get('requests')} requests for "
                f"{', '.join(held)}, submitted by an earlier --batch run) is still "
                f"{record['status']} at the provider and will be billed; rerun with --batch to "
                f"wait for it and collect its replies, or cancel batch {batch_id} at the "
                "provider and rerun: what it finished is collected, the rest asked live; "
                "nothing was called"
            )


def check_prices(client: ModelClient, models: tuple[str, ...]) -> None:
    """With --max-cost, every model to call needs a known price (else the cap means nothing)."""
    if client.budget is not None:
        for model in models:
            client.budget.price(model)
