"""The environment's own model: the 20 Questions oracle and the tool-use simulated user.

They are part of the environment, so a job chooses them once (``env_checkpoint``, default the embedded base
model; or ``env_endpoint`` + ``env_endpoint_model``, an admin-configured OpenAI-compatible endpoint) and never
implicitly as the policy being trained or evaluated: otherwise the success rates of two checkpoints come from
two different environments. Every stored episode names its environment model (``meta.env_model``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nlac_core.backends import get_backend
from webapp.jobs import endpoints, loaded_model
from webapp.jobs.configs import ConfigError, ModelChoice
from webapp.jobs.models import Checkpoint
from webapp.jobs.services.checkpoints import checkpoint_for


def label(config) -> str:
    """How episodes name the environment model: ``endpoint:NAME/MODEL`` or ``checkpoint:NAME``."""
    if config.env_endpoint:
        return f"endpoint:{config.env_endpoint}/{config.env_endpoint_model}"
    return f"checkpoint:{checkpoint_for(config.env_checkpoint).name}"


@contextmanager
def environment_backend(config, policy: Any, policy_checkpoint: Checkpoint | None) -> Iterator[tuple[Any, str]]:
    """(backend, label) of the job's environment model; the policy's own instance when it is the same model (one
    copy in memory), else one built for this job and closed after it."""
    name = label(config)
    if config.env_endpoint:
        found = endpoints.configured().get(config.env_endpoint)
        if found is None:
            raise ConfigError("env_endpoint", f"{config.env_endpoint!r} is not a configured endpoint on this worker")

        backend = get_backend("openai", model=config.env_endpoint_model, base_url=found.base_url,
                              api_key=found.api_key())
        yield backend, name
        return
    checkpoint = checkpoint_for(config.env_checkpoint)
    if getattr(config, "backend", "hf") == "hf" and policy_checkpoint is not None \
            and policy_checkpoint.path == checkpoint.path:
        yield policy, name
        return
    backend = loaded_model.extra_backend(ModelChoice(backend="hf", checkpoint=checkpoint.pk,
                                                     batch_size=getattr(config, "batch_size", 16)), checkpoint)
    try:
        yield backend, name
    finally:
        close = getattr(backend, "close", None)
        if close is not None and backend is not policy:
            close()
