"""Batch mode: the same door as live calls, fetched through the provider's batch API.

`BatchClient.complete()` has the live client's signature and returns the same CallResult, so the
run and judge stages parse, retry and record a batched reply exactly as a live one. Behind it,
requests are streamed to a JSONL spool file in the provider's format (custom_id = the cache
key), uploaded with litellm's `acreate_file`, submitted with `acreate_batch`, polled with
`aretrieve_batch`, and read back with `afile_content(stream=True)`, line by line.

A submitted batch is evidence: its id goes into the run's `batches` stream the moment the
provider returns it. A later process first polls every batch still open there and serves its
replies, so a crash or a closed laptop resumes by polling, never by resubmitting. Failed lines
(429, 5xx, expiry) go into a next batch, up to the retry limit; permanent ones (400, 401, 404)
are recorded at once, as live.
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konkord.configuration.call_settings import CallSettings, Message
from konkord.configuration.credentials import secret_values
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, Record, now_iso
from konkord.evidence.stopping import STOP, StopRequested
from konkord.providers.batch_api import BatchApi
from konkord.providers.batch_format import (
    BATCH_DISCOUNT,
    MAX_BYTES,
    MAX_REQUESTS,
    STREAM,
    TERMINAL,
    Route,
    request_line,
    result_of_line,
    route_for,
    safe_base,
)
from konkord.providers.batch_resume import ResumedRequests, find_batch, open_batches
from konkord.providers.batch_spool import PendingRequest, Spool, Tally
from konkord.providers.calls import CallResult
from konkord.providers.llm import ModelClient
from konkord.providers.loading import env_float, load_litellm


@dataclass
class BatchClient(ModelClient):
    """A ModelClient whose calls go through the provider's batch API (see the module doc)."""

    log: EvidenceLog | None = None
    poll_s: float = field(default_factory=lambda: env_float("KONKORD_BATCH_POLL", 30.0))
    quiet_s: float = 0.2
    max_requests: int = field(
        default_factory=lambda: int(env_float("KONKORD_BATCH_MAX_REQUESTS", MAX_REQUESTS))
    )
    max_bytes: int = MAX_BYTES
    on_status: Callable[[str], None] | None = None
    _spools: dict[Route, Spool] = field(default_factory=dict, init=False)
    _waiting: dict[str, PendingRequest] = field(default_factory=dict, init=False)
    _resumed: asyncio.Lock | None = field(default=None, init=False)
    _resume_done: bool = field(default=False, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _spool_dir: Path | None = field(default=None, init=False)
    _counter: int = field(default=0, init=False)
    _routes: dict[tuple[str, str | None], Route] = field(default_factory=dict, init=False)

    def _say(self, text: str) -> None:
        if self.on_status is not None:
            self.on_status(text)

    # --- the door --------------------------------------------------------------------------

    async def complete(
        self, model: str, messages: list[Message], settings: CallSettings, use_cache: bool = True
    ) -> CallResult:
        """One chat completion, answered by a batch (or by the cache, or an earlier batch)."""
        key = self.cache_key(model, messages, settings)
        await self._resume_open_batches()
        if key in self.collected:
            return self.collected.pop(key)
        cache = self._response_cache()
        if use_cache and cache is not None and (hit := cache.get(key)) is not None:
            return hit
        if settings.top_logprobs:
            raise KonkordError("--batch: log-probabilities are not read from batches; run live")
        hold = await self.budget.reserve(model, messages, settings) if self.budget else None
        waiting = self._waiting.get(key)
        future: asyncio.Future[CallResult] = asyncio.get_running_loop().create_future()
        if waiting is not None:
            waiting.futures.append(future)
        else:
            self._enqueue(key, model, messages, settings, future)
        # The request is on disk now; holding its text until the reply comes would keep a whole
        # run's prompts in memory.
        del messages
        try:
            result = await future
        except BaseException:
            if self.budget is not None and hold is not None:
                self.budget.settle(hold, None)
            raise
        if self.budget is not None and hold is not None:
            paid = result.ok and not result.cached
            self.budget.settle(
                hold, result.cost_usd if paid else 0.0, (result.tokens_in or 0) if paid else None
            )
        return result

    def _route(self, model: str, api_base: str | None) -> Route:
        found = self._routes.get((model, api_base))
        if found is None:
            found = self._routes[(model, api_base)] = route_for(model, api_base)
        return found

    def _enqueue(
        self,
        key: str,
        model: str,
        messages: list[Message],
        settings: CallSettings,
        future: asyncio.Future[CallResult],
    ) -> None:
        route = self._route(model, settings.api_base)
        line = request_line(key, route, messages, settings)
        request = PendingRequest(key, model, settings, [future], Path(), 0, len(line))
        self._add(route, request, line)

    def _add(self, route: Route, request: PendingRequest, line: bytes) -> None:
        """Write one request line to its route's spool; seal and submit a full spool."""
        spool = self._spools.get(route)
        if spool is not None and (
            len(spool.requests) >= self.max_requests or spool.size + len(line) > self.max_bytes
        ):
            self._submit(spool)
            spool = None
        if spool is None:
            spool = self._spools[route] = Spool(route, self._new_spool_path())
            self._start(self._when_quiet(route, spool))
        request.spool, request.offset = spool.path, spool.write(line)
        spool.requests[request.key] = request
        self._waiting[request.key] = request

    def _new_spool_path(self) -> Path:
        if self._spool_dir is None:
            base = (self.cache_dir or Path(".konkord/cache")).parent / "batches"
            self._spool_dir = base / uuid.uuid4().hex[:12]
            self._spool_dir.mkdir(parents=True, exist_ok=True)
        self._counter += 1
        return self._spool_dir / f"requests-{self._counter}.jsonl"

    def _start(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _when_quiet(self, route: Route, spool: Spool) -> None:
        """Submit a spool once no request has joined it for `quiet_s` (all callers have asked)."""
        while self._spools.get(route) is spool:
            seen = len(spool.requests)
            await asyncio.sleep(self.quiet_s)
            if self._spools.get(route) is spool and len(spool.requests) == seen:
                self._submit(spool)

    def _submit(self, spool: Spool) -> None:
        if self._spools.get(spool.route) is spool:
            del self._spools[spool.route]
        spool.seal()
        self._start(self._run(spool))

    # --- one batch, start to end -----------------------------------------------------------

    async def _run(self, spool: Spool) -> None:
        try:
            batch_id, input_file_id = await self._upload_and_create(spool)
            await self._poll_and_collect(batch_id, spool.route, spool.requests, input_file_id)
            spool.path.unlink(missing_ok=True)  # retried lines were copied to a new spool
        except BaseException as exc:
            for request in spool.requests.values():
                self._waiting.pop(request.key, None)
                for future in request.futures:
                    if not future.done():
                        future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def _nap(self, batch_id: str) -> None:
        """Wait poll_s before the next status read; after Ctrl-C, stop waiting.

        Nothing is lost by stopping: the batch is in the evidence and the provider keeps
        running it, so the same command collects it later.
        """
        end = time.monotonic() + self.poll_s
        while True:
            if STOP.requested:
                self._say(f"batch {batch_id}: left running; the same command collects it later")
                raise StopRequested("stopped by Ctrl-C while the batch runs at the provider")
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.5))

    async def _upload_and_create(self, spool: Spool) -> tuple[str, str]:
        if STOP.requested:  # after Ctrl-C nothing new is submitted (nothing paid yet)
            raise StopRequested("stopped by Ctrl-C before this batch was submitted")
        api = self.api()
        creds = spool.route.credentials()
        with open(spool.path, "rb") as handle:
            uploaded = await api.upload(handle, creds)
        models = sorted({r.model for r in spool.requests.values()})
        about: Record = {
            "input_file_id": str(uploaded.id),
            "models": models,
            "provider": spool.route.provider,
            "provider_model": spool.route.provider_model,
            "api_base": safe_base(spool.route.api_base),
            "requests": len(spool.requests),
            "created_at": now_iso(),
        }
        # Recorded before the batch is created: should the process die between the provider
        # creating the batch and the record below, a rerun finds it by its input file.
        self._record({**about, "status": "uploaded"})
        created = await api.create(str(uploaded.id), len(spool.requests), creds)
        batch_id = str(created.id)
        self._record({**about, "status": "submitted", "batch_id": batch_id})
        self._say(f"batch {batch_id}: {len(spool.requests)} requests submitted ({models[0]})")
        return batch_id, str(uploaded.id)

    def api(self) -> BatchApi:
        """The provider's batch API with this client's timeout and retry settings."""
        return BatchApi(self.timeout_s, self.max_retries, self.backoff_base_s, self.backoff_cap_s)

    def _record(self, fields: Record) -> None:
        if self.log is not None:
            self.log.append(STREAM, {"kind": "batch", **fields})

    async def _poll_and_collect(
        self,
        batch_id: str,
        route: Route,
        requests: dict[str, PendingRequest],
        input_file_id: str,
        wait: bool = True,
    ) -> str | None:
        """Wait for the batch to end (or, without `wait`, read its status once) and collect
        it; the status of a batch left running, None once collected."""
        api = self.api()
        creds = route.credentials()
        last = ""
        while True:
            batch = await api.status(batch_id, creds)
            status = str(batch.status)
            if status != last:
                self._say(f"batch {batch_id}: {status}")
                last = status
            if status in TERMINAL:
                break
            if not wait:
                return status
            await self._nap(batch_id)
        started = time.perf_counter()
        tally = Tally(self._response_cache())
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                async for entry in api.lines(str(file_id), creds):
                    custom_id = entry.get("custom_id")
                    if (
                        isinstance(custom_id, str)
                        and custom_id in requests
                        and custom_id not in tally.seen
                    ):
                        request = requests[custom_id]
                        self._deliver(request, tally.add(request, self._result_of(entry, request)))
        for key, request in list(requests.items()):
            if key not in tally.seen:
                missing = CallResult(
                    text=None,
                    error=f"batch {batch_id} ended {status} without this request",
                    error_kind="transient",
                )
                self._deliver(request, tally.add(request, missing))
        tally.flush()
        failed, cost = tally.failed, tally.cost
        self._record(
            {
                "input_file_id": input_file_id,
                "batch_id": batch_id,
                "status": "collected",
                "provider_status": status,
                "requests": len(requests),
                "failed": failed,
                "cost_usd": cost,
                "collected_at": now_iso(),
            }
        )
        # litellm builds a fresh OpenAI client (and connection pool) for every file and batch
        # call and never closes it; collecting them now, while their event loop still runs,
        # closes their sockets cleanly instead of after the loop is gone.
        gc.collect()
        self._say(
            f"batch {batch_id}: collected {len(requests) - failed} replies, {failed} failed "
            f"({time.perf_counter() - started:.1f} s)"
        )
        return None

    def _deliver(self, request: PendingRequest, result: CallResult) -> None:
        """Hand a reply to its callers, or queue a transient failure for the next batch."""
        if (
            not result.ok
            and result.error_kind == "transient"
            and request.attempts < self.max_retries
            and request.futures
        ):
            request.attempts += 1
            with open(request.spool, "rb") as handle:
                handle.seek(request.offset)
                line = handle.read(request.length)
            self._add(self._route(request.model, request.settings.api_base), request, line)
            return
        self._waiting.pop(request.key, None)
        if not request.futures:  # a reply from a resumed batch: kept until someone asks
            if result.ok:
                self.collected[request.key] = result  # a failure is simply asked again
            return
        first, *others = request.futures
        if not first.done():
            first.set_result(result)
        for future in others:  # the same request asked twice: the second is served as cached
            if not future.done():
                future.set_result(CallResult(**{**result.__dict__, "cached": True}))

    def _result_of(self, entry: Record, request: PendingRequest) -> CallResult:
        """A batch output or error line as the CallResult a live call would have given."""
        if self._secrets is None:
            self._secrets = secret_values()
        result = result_of_line(entry, self._secrets)
        if result.ok:
            result.cost_usd = self.batch_cost(
                request.model, result.tokens_in or 0, result.tokens_out or 0
            )
        return result

    def batch_cost(self, model: str, tokens_in: int, tokens_out: int) -> float | None:
        """Dollars for one batched call at batch prices; None when no price is known."""
        price = self.prices.get(model)
        if price is not None:
            live = tokens_in * price.input_per_million + tokens_out * price.output_per_million
            return live / 1e6 * BATCH_DISCOUNT
        litellm = load_litellm()
        if not self._model_known(litellm, model):
            return None
        from litellm.cost_calculator import batch_cost_calculator

        usage = litellm.Usage(
            prompt_tokens=tokens_in,
            completion_tokens=tokens_out,
            total_tokens=tokens_in + tokens_out,
        )
        prompt, completion = batch_cost_calculator(usage=usage, model=model)
        return float(prompt + completion)

    # --- resuming --------------------------------------------------------------------------

    async def _resume_open_batches(self) -> None:
        """Before any new submission: collect every batch an earlier process left open."""
        if self._resume_done:
            return
        if self._resumed is None:
            self._resumed = asyncio.Lock()
        async with self._resumed:
            if not self._resume_done:
                await self.collect_open_batches(wait=True)
                self._resume_done = True

    async def collect_open_batches(self, wait: bool) -> list[Record]:
        """Collect every batch an earlier process left open into `collected` (and the cache):
        waiting for each to end, or, without `wait`, only those already ended. Returns the
        ones still running, each with its batch id and status."""
        running = await asyncio.gather(
            *(self._resume(record, wait) for record in open_batches(self.log))
        )
        self._resume_done = True
        return [record for record in running if record is not None]

    async def _resume(self, record: Record, wait: bool = True) -> Record | None:
        route = Route(
            str(record.get("provider")),
            str(record.get("provider_model")),
            str(record["api_base"]) if record.get("api_base") else None,
        )
        input_file_id = str(record["input_file_id"])
        batch_id = record.get("batch_id")
        if batch_id is None:  # uploaded, then the process died: was the batch created?
            batch_id = await find_batch(self.api().retrying, route, input_file_id)
            if batch_id is None:
                self._record({**record, "status": "abandoned", "created_at": now_iso()})
                return None  # never created, never paid: its requests are simply asked again
            self._record({**record, "status": "submitted", "batch_id": batch_id})
        self._say(f"batch {batch_id}: resuming (submitted earlier)")
        models = [str(m) for m in record.get("models") or []]
        requests = ResumedRequests(models[0] if models else "")
        status = await self._poll_and_collect(
            str(batch_id), route, requests, input_file_id, wait
        )
        return None if status is None else {**record, "batch_id": batch_id, "status": status}
