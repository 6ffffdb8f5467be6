"""The model a worker process keeps loaded between jobs: one at a time (one per GPU worker).

A job asks for (backend, checkpoint path or configured endpoint); the same pair reuses the
loaded instance, another evicts it first (``close()`` frees the GPU memory).
Tests swap in a fake backend with ``override``.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from nlac_core.backends import get_backend
from nlac_core.training import LaunchConfig
from webapp.jobs import endpoints
from webapp.jobs.configs import ConfigError, ModelChoice
from webapp.jobs.endpoints import Endpoint
from webapp.jobs.models import Checkpoint

log = logging.getLogger(__name__)

_lock = threading.Lock()
_current: tuple[tuple, Any] | None = None
_override: Callable[[ModelChoice, Checkpoint | None], Any] | None = None
loads = 0  # how many models this process loaded (a reused model is not a load)


def override(factory: Callable[[ModelChoice, Checkpoint | None], Any] | None) -> None:
    """Build backends with ``factory`` instead (tests: a fake backend where the model is beside the point)."""
    global _override
    _override = factory
    evict()


def backend_for(config: ModelChoice, checkpoint: Checkpoint | None) -> Any:
    global _current, loads
    if _override is not None:
        return _override(config, checkpoint)
    if config.backend == "openai":
        endpoint = _endpoint(config)
        key: tuple = ("openai", endpoint, config.endpoint_model)
    else:
        assert checkpoint is not None, "hf and vllm jobs run a registered checkpoint"
        key = (config.backend, checkpoint.path)
    with _lock:
        if _current is not None and _current[0] == key:
            backend = _current[1]
        else:
            evict_locked()
            if config.backend == "openai":
                backend = get_backend("openai", model=config.endpoint_model, base_url=endpoint.base_url,
                                      api_key=endpoint.api_key())
            else:
                backend = get_backend(config.backend, model=visible_path(checkpoint), **host_settings(config.backend))
            loads += 1
            log.info("loaded %s model %s", config.backend, key[1])
            _current = (key, backend)
    if hasattr(backend, "batch_size"):
        backend.batch_size = config.batch_size
    return backend


def host_settings(backend: str) -> dict[str, Any]:
    """What this worker host sets for a local engine (settings.NLAC_VLLM_*): a job names the model, the host
    how it runs on its GPUs."""
    if backend != "vllm":
        return {}
    return {"tensor_parallel_size": settings.NLAC_VLLM_TENSOR_PARALLEL_SIZE,
            "gpu_memory_utilization": settings.NLAC_VLLM_GPU_MEMORY_UTILIZATION,
            "max_model_len": settings.NLAC_VLLM_MAX_MODEL_LEN}


def training_launch(strategy: str) -> LaunchConfig:
    """Where this worker host trains (settings.NLAC_TRAIN_*): a job picks the strategy, the host the processes.
    The worker is always the main machine of a multi-host run; the others join with the CLI."""
    return LaunchConfig(processes=settings.NLAC_TRAIN_PROCESSES, strategy=strategy,
                        machines=settings.NLAC_TRAIN_MACHINES, machine_rank=0,
                        main_process_ip=settings.NLAC_TRAIN_MAIN_PROCESS_IP,
                        main_process_port=settings.NLAC_TRAIN_MAIN_PROCESS_PORT)


def visible_path(checkpoint: Checkpoint) -> str:
    """The checkpoint's directory, which this worker must see: one on another host's local disk fails the job at
    once, naming the path and this host (model directories belong on the shared model store)."""
    if not Path(checkpoint.path).is_dir():
        raise FileNotFoundError(
            f"checkpoint {checkpoint.name!r}: {checkpoint.path} is not readable on worker host {socket.gethostname()} "
            "(no such directory); every worker must see the model store (NLAC_MODEL_DIR and NLAC_TRAIN_DIR on "
            "shared storage, deploy/README.md)")
    return checkpoint.path


def _endpoint(config: ModelChoice) -> Endpoint:
    """The configured endpoint the job names, looked up now: the base URL and the key variable come from the
    admin's list on this worker, never from the job's row (an endpoint removed since the launch fails the job)."""
    found = endpoints.configured().get(config.endpoint)
    if found is None:
        raise ConfigError("endpoint", f"{config.endpoint!r} is not a configured endpoint on this worker")
    return found


def extra_backend(config: ModelChoice, checkpoint: Checkpoint) -> Any:
    """A second model for the same job (a backup's separate target network): built for this job only, not
    kept (the caller closes it), and swapped by ``override`` in tests like the main one."""
    if _override is not None:
        return _override(config, checkpoint)
    backend = get_backend(config.backend, model=visible_path(checkpoint), **host_settings(config.backend))
    if hasattr(backend, "batch_size"):
        backend.batch_size = config.batch_size
    return backend


def evict() -> None:
    with _lock:
        evict_locked()


def evict_locked() -> None:
    global _current
    if _current is not None:
        close = getattr(_current[1], "close", None)
        if close is not None:
            close()
        _current = None
