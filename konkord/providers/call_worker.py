"""A worker process of the call pool (`konkord.providers.call_pool`): litellm calls, nothing else.

Started as `python -m konkord.providers.call_worker` with pipes for stdin and stdout. The first
frame on stdin is the run's prices; every later one is a call (an id, litellm's arguments and
the attempt's number), answered on the original stdout with the id and the CallResult, or with
the failure as plain data. Nothing here writes a file: the cache and the evidence are the
parent's. Stray prints (litellm's) go to stderr, never into the replies.

It ignores Ctrl-C (the parent waits for the calls in flight, then closes the pipe), and exits
when its input closes or its parent dies (PR_SET_PDEATHSIG, and a check that the parent it was
started by is still its parent).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import traceback
from typing import Any

from konkord.evidence.workers import die_with_parent
from konkord.providers.call_pool import PARENT_ENV, Outbox, read_frame, read_frames
from konkord.providers.llm import ModelClient
from konkord.providers.loading import RemoteCallError, keep_litellm_warnings_quiet, load_litellm


async def _serve(out: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0)
    )
    transport, _ = await loop.connect_write_pipe(
        asyncio.Protocol, os.fdopen(out, "wb", buffering=0)
    )
    prices = await read_frame(reader)
    client = ModelClient(prices=prices, cache_dir=None, max_retries=0)
    litellm = load_litellm()
    running: set[asyncio.Task[None]] = set()

    async def one(call_id: int, kwargs: dict[str, Any], attempts: int) -> None:
        keep_litellm_warnings_quiet()
        reply: Any
        try:
            reply = await client.attempt(litellm, kwargs, attempts)
        except Exception as exc:
            failure = RemoteCallError.of(exc, litellm)
            reply = (failure.kind, failure.text, failure.retry_after)
        outbox.put((call_id, reply))

    outbox = Outbox(transport.write)
    with contextlib.suppress(ConnectionError):
        async for calls in read_frames(reader):
            for call_id, kwargs, attempts in calls:
                task = asyncio.ensure_future(one(call_id, kwargs, attempts))
                running.add(task)
                task.add_done_callback(running.discard)
    os._exit(0)  # the parent closed the pipe (or died): calls running are dropped


def main() -> None:
    """Serve calls until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.environ.get(PARENT_ENV)
    die_with_parent(int(parent) if parent else None)
    out = os.dup(1)  # the replies' pipe
    os.dup2(2, 1)  # whatever else prints lands on stderr
    sys.stdout = sys.stderr
    try:
        asyncio.run(_serve(out))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)  # litellm's threads (logging, callbacks) must not hold the exit up
if __name__ == "__main__":
    main()
