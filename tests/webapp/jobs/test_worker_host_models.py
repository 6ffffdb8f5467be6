"""What a worker host decides about a local model: where it must find the checkpoint (a directory it cannot see
fails the job at once, naming path and host) and how vLLM runs on its GPUs (settings.NLAC_VLLM_*)."""

from __future__ import annotations

import socket

import pytest

from webapp.jobs import loaded_model
from webapp.jobs.configs import CritiqueJob
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def built(monkeypatch):
    """The (backend name, keyword arguments) each model load asked nlac_core for; nothing is loaded."""
    calls: list[tuple[str, dict]] = []

    class Loaded:
        batch_size = 1

    def get_backend(name, **kwargs):
        calls.append((name, kwargs))
        return Loaded()

    monkeypatch.setattr(loaded_model, "get_backend", get_backend)
    loaded_model.evict()
    yield calls
    loaded_model.evict()


def test_it_runs_vllm_with_the_worker_hosts_parallelism_and_memory_settings(tmp_path, settings, built):
    settings.NLAC_VLLM_TENSOR_PARALLEL_SIZE, settings.NLAC_VLLM_GPU_MEMORY_UTILIZATION = 4, 0.6
    settings.NLAC_VLLM_MAX_MODEL_LEN = 8192
    checkpoint = Checkpoint.objects.create(name="big", path=str(tmp_path))
    loaded_model.backend_for(CritiqueJob.parse({"backend": "vllm", "checkpoint": checkpoint.pk}), checkpoint)
    assert built == [("vllm", {"model": str(tmp_path), "tensor_parallel_size": 4, "gpu_memory_utilization": 0.6,
                               "max_model_len": 8192})]
    loaded_model.evict()
    loaded_model.backend_for(CritiqueJob.parse({"backend": "hf", "checkpoint": checkpoint.pk}), checkpoint)
    assert built[-1] == ("hf", {"model": str(tmp_path)})  # the hf backend takes no engine settings


def test_it_fails_a_job_at_once_when_the_worker_cannot_see_the_checkpoint(tau_project, personas, built):
    elsewhere = Checkpoint.objects.create(name="trained-on-host-b", path="/srv/host-b-local-disk/ckpt-7")
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    job = lifecycle.check_create_job(personas["researcher"], "critique", {"checkpoint": elsewhere.pk},
                                     {"trajectory_ids": ids})
    assert execute(job.pk, "w:1") == Job.FAILED
    job.refresh_from_db()
    assert "/srv/host-b-local-disk/ckpt-7" in job.error and socket.gethostname() in job.error
    assert "trained-on-host-b" in job.error and built == []  # nothing was loaded
