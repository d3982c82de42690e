"""What a model call is asked with, besides its messages: the sampling settings (all of them in
the response cache key) from runs.json or the command line, and the message type.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

Message = dict[str, str]


@dataclass(frozen=True)
class CallSettings:
    """Everything besides the messages that changes a response; all of it is in the cache key."""

    temperature: float | None = 0.0
    max_tokens: int = 4096
    seed: int | None = 0
    api_base: str | None = None
    top_logprobs: int | None = None  # ask for token log-probabilities (a first-pass judge)

    def generation(self) -> dict[str, Any]:
        """The sampling settings, as stored with each answer (the server address is not one)."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}

    def digest(self) -> str:
        """A short stable hash of all these settings."""
        blob = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]
