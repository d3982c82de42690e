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
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from konkord.configuration.call_settings import CallSettings, Message
from konkord.configuration.credentials import secret_values
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, Record, now_iso
from konkord.providers.batch_api import BatchApi
from konkord.providers.batch_format import (
    BATCH_DISCOUNT,
    MAX_BYTES,
    MAX_REQUESTS,
    Route,
    request_line,
    result_of_line,
    route_for,
)
from konkord.providers.batch_resume import ResumedRequests, find_batch, open_batches
from konkord.providers.batch_run import BatchRun, record_batch
from konkord.providers.batch_spool import PendingRequest, Spool, Waiter
from konkord.providers.budget import Hold
from konkord.providers.calls import CallResult
from konkord.providers.llm import ModelClient
from konkord.providers.loading import env_float, load_litellm
from konkord.providers.replies import Replies, Tagged, settle

T = TypeVar("T")


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
    # every Replies sent to: a batch being collected waits while one of them is full
    _paced: weakref.WeakSet[Replies[Any]] = field(default_factory=weakref.WeakSet, init=False)

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
        hit = self._answered(key, use_cache)
        if hit is not None:
            return hit
        hold = await self._reserve(model, messages, settings)
        future: asyncio.Future[CallResult] = asyncio.get_running_loop().create_future()
        self._wait(key, model, messages, settings, future)
        # The request is on disk now; holding its text until the reply comes would keep a whole
        # run's prompts in memory.
        del messages
        try:
            result = await future
        except BaseException:
            settle(self.budget, hold, None)
            raise
        settle(self.budget, hold, result)
        return result

    async def send(
        self,
        replies: Replies[T],
        tag: T,
        model: str,
        messages: list[Message],
        settings: CallSettings,
        use_cache: bool = True,
    ) -> None:
        """Ask without waiting: the reply lands in `replies` under `tag`. While it waits, what
        is held is its key, the tag and its budget hold (no coroutine); its text is in the
        spool file. Raises NotLaunched (the cap, Ctrl-C) for a call that is not sent."""
        key = self.cache_key(model, messages, settings)
        await self._resume_open_batches()
        hit = self._answered(key, use_cache)
        if hit is None:
            hold = await self._reserve(model, messages, settings)
            replies.budget = self.budget
            self._paced.add(replies)
            self._wait(key, model, messages, settings, Tagged(replies, tag, hold))
        else:
            replies.put(tag, hit)
        replies.waiting += 1

    def _answered(self, key: str, use_cache: bool) -> CallResult | None:
        """A reply already in: from a batch an earlier process left open, or the cache."""
        if key in self.collected:
            return self.collected.pop(key)
        cache = self._response_cache()
        if use_cache and cache is not None:
            return cache.get(key)
        return None

    async def _reserve(
        self, model: str, messages: list[Message], settings: CallSettings
    ) -> Hold | None:
        if settings.top_logprobs:
            raise KonkordError("--batch: log-probabilities are not read from batches; run live")
        return await self.budget.reserve(model, messages, settings) if self.budget else None

    def _wait(
        self, key: str, model: str, messages: list[Message], settings: CallSettings, waiter: Waiter
    ) -> None:
        """Join the same request already waiting, or write this one to a spool."""
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.waiters.append(waiter)
        else:
            self._enqueue(key, model, messages, settings, waiter)

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
        waiter: Waiter,
    ) -> None:
        route = self._route(model, settings.api_base)
        line = request_line(key, route, messages, settings)
        request = PendingRequest(key, model, settings, [waiter], Path(), 0, len(line))
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

    # --- one batch, start to end (batch_run) ---------------------------------------------

    def _batch_run(self, pace: Callable[[], Awaitable[None]] | None = None) -> BatchRun:
        return BatchRun(
            self.api(), self.poll_s, self._response_cache(), self._say, self._record,
            self._result_of, self._deliver, pace,
        )

    async def _room(self) -> None:
        """Wait until every Replies this client hands back to has room (see Replies.room)."""
        for replies in list(self._paced):
            await replies.room()

    async def _run(self, spool: Spool) -> None:
        try:
            run = self._batch_run(self._room)
            batch_id, input_file_id = await run.submit(spool)
            await run.collect(batch_id, spool.route, spool.requests, input_file_id)
            spool.path.unlink(missing_ok=True)  # retried lines were copied to a new spool
        except BaseException as exc:
            for request in spool.requests.values():
                self._waiting.pop(request.key, None)
                for waiter in request.waiters:
                    if not waiter.done():
                        waiter.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    def api(self) -> BatchApi:
        """The provider's batch API with this client's timeout and retry settings."""
        return BatchApi(self.timeout_s, self.max_retries, self.backoff_base_s, self.backoff_cap_s)

    def _record(self, fields: Record) -> None:
        record_batch(self.log, fields)

    def _deliver(self, request: PendingRequest, result: CallResult) -> None:
        """Hand a reply to its callers, or queue a transient failure for the next batch."""
        if (
            not result.ok
            and result.error_kind == "transient"
            and request.attempts < self.max_retries
            and request.waiters
        ):
            request.attempts += 1
            with open(request.spool, "rb") as handle:
                handle.seek(request.offset)
                line = handle.read(request.length)
            self._add(self._route(request.model, request.settings.api_base), request, line)
            return
        self._waiting.pop(request.key, None)
        if not request.waiters:  # a reply from a resumed batch: kept until someone asks
            if result.ok:
                self.collected[request.key] = result  # a failure is simply asked again
            return
        first, *others = request.waiters
        if not first.done():
            first.set_result(result)
        for waiter in others:  # the same request asked twice: the second is served as cached
            if not waiter.done():
                waiter.set_result(CallResult(**{**result.__dict__, "cached": True}))

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
        status = await self._batch_run().collect(
            str(batch_id), route, requests, input_file_id, wait
        )
        return None if status is None else {**record, "batch_id": batch_id, "status": status}
