"""The lines a stage prints about its failed calls: the same error, met by many calls, is one
line with its count (48 calls to a server that is not there are one line naming its address,
not 48 copies of litellm's message); the rest are listed one per call, up to a limit."""

from __future__ import annotations

import re

from konkord.configuration.credentials import strip_url_credentials

SHOWN = 10
GROUPED_FROM = 4  # calls with the same error; fewer are listed one by one
# What an unreachable server looks like through litellm and the OpenAI client.
UNREACHABLE = re.compile(
    r"Connection error|ConnectError|Connection refused|Name or service not known|"
    r"nodename nor servname|getaddrinfo failed|No route to host",
    re.IGNORECASE,
)
_LITELLM_PREFIX = re.compile(r"^(?:\w+Error: )?(?:litellm\.\w+: )?(?:\w+Error: )?")


def _plain(error: str) -> str:
    """litellm's message without the exception names it repeats in front of it."""
    return _LITELLM_PREFIX.sub("", error).strip() or error


def failure_lines(failures: list[str], api_base: str | None = None) -> list[str]:
    """`failures` ("where: error", one per call) as lines to print, without "failed: "."""
    groups: dict[str, list[str]] = {}
    for line in failures:
        where, _, error = line.partition(": ")
        groups.setdefault(error, []).append(where)
    out: list[str] = []
    singles: list[str] = []
    for error, places in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        calls = f"{len(places)} call{'s' if len(places) != 1 else ''}"
        if UNREACHABLE.search(error):
            server = strip_url_credentials(api_base) if api_base else "the provider"
            out.append(
                f"{calls} could not reach {server} ({_plain(error)}): is the server running, "
                "and is that its address?"
            )
        elif len(places) >= GROUPED_FROM:
            out.append(f"{calls} ({places[0]} and {len(places) - 1} more): {error}")
        else:
            singles += [f"{where}: {error}" for where in places]
    out += singles
    if len(out) > SHOWN:
        out = [*out[:SHOWN], f"... and {len(out) - SHOWN} more"]
    return out
