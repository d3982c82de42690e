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
) -> ModelClient:
    """The client for one stage of `spec`'s run, with the options given on the command line."""
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
    return client


def check_prices(client: ModelClient, models: tuple[str, ...]) -> None:
    """With --max-cost, every model to call needs a known price (else the cap means nothing)."""
    if client.budget is not None:
        for model in models:
            client.budget.price(model)
