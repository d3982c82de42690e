"""Field types that the suite, runs.json and deployments models share, each check written once.

A pydantic `AfterValidator` on an `Annotated` type runs where a `field_validator` would and
raises the same "Value error, ..." a user reads, so swapping one for the other changes no message.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from konkord.configuration.credentials import url_credentials_problem


def _text_present(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _url_without_credentials(value: str | None) -> str | None:
    problem = url_credentials_problem(value)
    if problem:
        raise ValueError(problem)
    return value


NonEmptyText = Annotated[str, AfterValidator(_text_present)]
"""Text with something in it besides white space (a prompt)."""

ApiBase = Annotated[str | None, AfterValidator(_url_without_credentials)]
"""An endpoint URL that carries no key: keys belong in the environment, never in a file."""
