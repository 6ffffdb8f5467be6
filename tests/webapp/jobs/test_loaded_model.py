"""The worker keeps one model loaded: the same checkpoint is reused across jobs, another one evicts it."""

from __future__ import annotations

import pytest

from webapp.jobs import loaded_model
from webapp.jobs.configs import CritiqueJob
from webapp.jobs.models import Checkpoint

pytestmark = pytest.mark.django_db


class Recorded:
    built: list[Recorded] = []

    def __init__(self, model: str) -> None:
        self.model = model
        self.closed = False
        self.batch_size = 16
        Recorded.built.append(self)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def registry(monkeypatch):
    from nlac_core import backends

    Recorded.built = []
    monkeypatch.setitem(backends.REGISTRY, "hf", f"{__name__}:Recorded")
    loaded_model.evict()
    yield
    loaded_model.evict()


def test_it_reuses_the_loaded_model_for_the_same_checkpoint_and_evicts_it_for_another(registry, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()  # a worker loads only directories it can see
    a = Checkpoint.objects.create(name="a", path=str(tmp_path / "a"))
    b = Checkpoint.objects.create(name="b", path=str(tmp_path / "b"))
    loads = loaded_model.loads
    first = loaded_model.backend_for(CritiqueJob(batch_size=4), a)
    again = loaded_model.backend_for(CritiqueJob(batch_size=32), a)
    assert again is first and first.batch_size == 32 and loaded_model.loads == loads + 1
    other = loaded_model.backend_for(CritiqueJob(), b)
    assert other is not first and first.closed and not other.closed  # one model in memory at a time
    assert [r.model for r in Recorded.built] == [a.path, b.path] and loaded_model.loads == loads + 2
