"""The job-kind registry (``webapp.jobs.kinds``) walked entry by entry: what a newcomer adding a kind can forget
(a config class left out, a runner that does not resolve, a launch form for no kind, a dataset kind misspelt)
fails here, not at run time in a worker."""

from __future__ import annotations

import pytest

from webapp.datasets.models import KINDS as DATASET_KINDS
from webapp.jobs.configs import ConfigError, JobConfig, bound
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


@pytest.mark.parametrize("name", list(FORMS))
def test_it_derives_each_launch_form_from_its_config(name, db):
    """One default, one range, one set of choices per field: the form shows what the job would take unset."""
    config = JOB_KINDS[name].config
    form = FORMS[name]()
    for field_name, field in form.fields.items():
        if field_name in ("trajectory_ids", "filter"):
            continue
        info = config.model_fields[field_name]
        default = info.default
        assert field.initial in (default, None if default in ("", None) else default), field_name
        for attr, key in (("min_value", "ge"), ("max_value", "le")):
            if hasattr(field, attr):
                assert getattr(field, attr) == bound(config, field_name, key), (field_name, attr)
    assert not set(form.fields) & set(config.API_ONLY)


def test_it_puts_a_range_error_back_on_the_form_field(client_for, tau_project, sent):
    first = tau_project.trajectories.order_by("id").first().pk
    page = client_for("researcher").post("/jobs/new/critique/", {"trajectory_ids": str(first), "k": 3})
    assert page.status_code == 400 and "k &gt; 1 futures need sampling" in page.content.decode()
    page = client_for("researcher").post("/jobs/new/critique/", {"trajectory_ids": str(first), "chunk_size": 999})
    assert page.status_code == 400 and not Job.objects.exists() and sent == []
    # as a browser sends the untouched form: blank fields, the checked boxes "on"
    response = client_for("researcher").post("/jobs/new/critique/", {"trajectory_ids": str(first), "steps": "",
                                                                      "calibrate_verdicts": "on",
                                                                      "calibrate_outcome": "on"})
    assert response.status_code == 302
    assert Job.objects.get().config == JOB_KINDS["critique"].config.parse({}).to_dict()  # blank fields: defaults


def test_it_serves_every_kinds_config_schema_from_the_api(client_for):
    assert client_for("annotator").get("/api/job-kinds").status_code == 403
    kinds = {k["name"]: k for k in client_for("researcher").get("/api/job-kinds").json()}
    assert set(kinds) == set(JOB_KINDS)
    for name, kind in JOB_KINDS.items():
        schema = kinds[name]["config_schema"]
        assert set(schema["properties"]) == set(kind.config.model_fields)
        assert kinds[name]["launchable"] == kind.launchable and kinds[name]["queue"] == kind.queue
        for field_name, info in kind.config.model_fields.items():
            prop = schema["properties"][field_name]
            if not info.is_required():
                assert prop["default"] == info.default, (name, field_name)
    critique = kinds["critique"]["config_schema"]["properties"]
    assert critique["chunk_size"]["minimum"] == 1 and critique["chunk_size"]["maximum"] == 256
    assert critique["mode"]["enum"] == ["sectioned", "free", "free_zero_shot"]
    assert "/api/job-kinds" in client_for("researcher").get("/api/openapi.json").json()["paths"]


def test_it_launches_a_job_from_the_shell_with_options_from_the_config(personas, tau_project, sent, capsys):
    from django.core.management import CommandError, call_command

    first = tau_project.trajectories.order_by("id").first().pk
    call_command("launch_job", "critique", "--user", "researcher", "--trajectory-ids", str(first), "--k", "2",
                 "--temperature", "0.7", "--no-calibrate-outcome")
    job = Job.objects.get()
    assert job.kind == "critique" and job.config["k"] == 2 and job.config["calibrate_outcome"] is False
    assert job.selection["trajectory_ids"] == [first] and f"job {job.pk} (critique) queued" in capsys.readouterr().out
    with pytest.raises(CommandError, match="--temperature: k > 1 futures need sampling"):
        call_command("launch_job", "critique", "--user", "researcher", "--trajectory-ids", str(first), "--k", "2")
    with pytest.raises(CommandError, match="--chunk-size: must be between 1 and 256, got 0"):
        call_command("launch_job", "critique", "--user", "researcher", "--trajectory-ids", str(first),
                     "--chunk-size", "0")
    with pytest.raises(CommandError, match="may not run jobs"):
        call_command("launch_job", "rollout", "--user", "annotator")
    assert Job.objects.count() == 1
