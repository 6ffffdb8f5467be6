"""Job tests without a broker: enqueued ids are captured instead of sent (the broker is beside the point
here; tests/workers runs the same jobs through Redis and a real worker)."""

from __future__ import annotations

import pytest

from nlac_core.backends.fake import FakeBackend


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    """The job ids that would have gone to the broker, in order (sent on commit, like the real thing)."""
    from django.db import transaction

    from webapp.jobs.services import lifecycle

    ids: list[int] = []
    monkeypatch.setattr(lifecycle, "enqueue", lambda job: transaction.on_commit(lambda: ids.append(job.pk)))
    return ids


@pytest.fixture
def fake_model():
    """Jobs build a scripted backend instead of loading a model; yields the backends they built."""
    from webapp.jobs import loaded_model

    built: list[FakeBackend] = []

    def factory(config, checkpoint):
        backend = FakeBackend(model="fake-critic", responder=lambda r: " the user confirms",
                              scorer=lambda r: 0.0 if r.continuation.strip() in ("success", "optimal") else -2.0)
        built.append(backend)
        return backend

    loaded_model.override(factory)
    yield built
    loaded_model.override(None)
