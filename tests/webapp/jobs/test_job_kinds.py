"""The job-kind registry (``webapp.jobs.kinds``) walked entry by entry: what a newcomer adding a kind can forget
(a config class left out, a runner that does not resolve, a launch form for no kind, a dataset kind misspelt)
fails here, not at run time in a worker."""

from __future__ import annotations

import pytest

from webapp.datasets.models import KINDS as DATASET_KINDS
from webapp.jobs.configs import ConfigError, JobConfig
from webapp.jobs.forms import FORMS
from webapp.jobs.kinds import JOB_KINDS, TRAINING_KINDS, job_kind, taking
from webapp.jobs.models import Job

# kinds whose config has no usable default: each names the field a caller must give
NEEDS = {"import": "path", "build-snapshot": "snapshot", "export-snapshot": "export", "evaluate-critic": "snapshot"}


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_it_registers_every_config_class_once():
    declared = {c for c in _subclasses(JobConfig) if c.KIND}
    assert {k.config for k in JOB_KINDS.values()} == declared
    assert len(JOB_KINDS) == len(declared) and all(name == k.config.KIND for name, k in JOB_KINDS.items())


@pytest.mark.parametrize("name", list(JOB_KINDS))
def test_it_walks_one_kind(name, db):
    kind = JOB_KINDS[name]
    module, function = kind.runner_target()
    assert callable(getattr(module, function))
    assert kind.queue in ("gpu", "cpu") and kind.label and set(kind.dataset_kinds) <= set(DATASET_KINDS)
    if name in NEEDS:
        with pytest.raises(ConfigError) as refused:
            kind.config.parse({})
        assert refused.value.field == NEEDS[name]
    else:
        config = kind.config.parse({})
        assert kind.config.parse(config.to_dict()) == config  # what the job row stores reads back the same
    if name in FORMS:
        assert kind.launchable
        form = FORMS[name]()
        assert 'name="' in form.as_p()
        data = {f: form[f].initial for f in form.fields if form[f].initial is not None}
        bound = FORMS[name](data={k: v for k, v in data.items() if v is not False})
        assert bound.is_valid(), bound.errors
        parsed = kind.config.parse(bound.config())  # the form's own defaults make a valid job
        assert name == parsed.KIND


def test_it_knows_which_job_takes_which_snapshot():
    assert set(TRAINING_KINDS) == {"train-critic", "distill-policy"}
    assert taking("distillation", trains=True) == "distill-policy"
    assert taking("runtime_critic", trains=True) == "train-critic"
    assert taking("runtime_critic", trains=False) == "evaluate-critic"
    assert taking("trajectories", trains=True) is None and taking("distillation", trains=False) is None
    with pytest.raises(ConfigError, match="unknown job kind 'nope'"):
        job_kind("nope")


STARTED_BY = {"import": "POST /api/imports", "build-snapshot": "POST /api/datasets/{id}/build",
              "export-snapshot": "POST /api/snapshots/{id}/exports"}


@pytest.mark.parametrize("name", STARTED_BY)
def test_it_sends_an_internal_kind_to_the_endpoint_that_starts_it(name, client_for):
    assert {n for n, k in JOB_KINDS.items() if not k.launchable} == set(STARTED_BY)
    response = client_for("researcher").post("/api/jobs", {"kind": name, "config": {}}, content_type="application/json")
    assert response.status_code == 400 and STARTED_BY[name] in response.json()["detail"]
    assert not Job.objects.exists()
