"""Where a model is served, as runs.json says: its deployments (keys by variable name, regions,
local servers, rate limits), inline or in a file of their own.

    "deployments": {"openai/gpt-4o-mini": [
        {"name": "east", "api_key_env": "OPENAI_KEY_EAST", "rpm": 500},
        {"name": "local", "model": "openai/qwen", "api_base": "http://127.0.0.1:8000/v1"}]}

A key is never written in the file: a deployment names the environment variable that holds it.
Calling them (litellm's Router, pacing, fallbacks) is konkord.providers.deployments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator

from konkord.configuration.suite import parse_located
from konkord.configuration.validated import ApiBase
from konkord.configuration.yamlpos import load_json
from konkord.errors import KonkordError


class Deployment(BaseModel):
    """One place a model is served: a name for the evidence, the litellm model, where, limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    model: str | None = None  # the litellm model name here (default: the model it serves)
    api_base: ApiBase = None
    api_key_env: str | None = None  # the environment variable holding this deployment's key
    rpm: int | None = Field(default=None, gt=0, le=10**9)
    tpm: int | None = Field(default=None, gt=0, le=10**12)

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_files(cls, data: Any) -> Any:
        if isinstance(data, dict) and "api_key" in data:
            raise ValueError(
                "holds an api_key: keys never go in a file; put it in an environment variable "
                'and name the variable in "api_key_env"'
            )
        return data


class DeploymentMap(RootModel[dict[str, tuple[Deployment, ...]]]):
    """Model name -> its deployments (at least one each, names unique per model)."""

    @field_validator("root")
    @classmethod
    def _names(cls, value: dict[str, tuple[Deployment, ...]]) -> dict[str, tuple[Deployment, ...]]:
        for model, deployments in value.items():
            if not deployments:
                raise ValueError(f'"{model}" lists no deployment')
            names = [d.name for d in deployments]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f'"{model}" names deployment "{twice[0]}" twice')
        return value


def load_deployment_file(path: Path) -> dict[str, tuple[Deployment, ...]]:
    """A deployments file named by runs.json, validated with file:line: field errors."""
    if not path.is_file():
        raise KonkordError(f"{path}: the deployments file named in runs.json was not found")
    located = load_json(path)
    parsed: DeploymentMap = parse_located(path, located, DeploymentMap)
    return parsed.root
