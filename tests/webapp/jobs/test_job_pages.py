"""Job and checkpoint pages over HTTP: who may see them, launch forms and their errors, live partials."""

from __future__ import annotations

import pytest

from webapp.jobs.models import Checkpoint, Job, StepCritique
from webapp.jobs.services import lifecycle


@pytest.fixture
def job(tau_project, personas):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    return lifecycle.check_create_job(personas["researcher"], "critique", {"steps": "first"},
                                      {"trajectory_ids": ids})


@pytest.mark.parametrize("url", ["/jobs/", "/jobs/new/critique/", "/checkpoints/"])
@pytest.mark.parametrize("persona", ["annotator", "reviewer", "outsider"])
def test_it_forbids_jobs_to_everyone_but_researchers(client_for, url, persona):
    assert client_for(persona).get(url).status_code == 403


def test_it_forbids_an_annotator_to_launch_cancel_or_see_a_job(client_for, job):
    client = client_for("annotator")
    assert client.post("/jobs/new/critique/", {"trajectory_ids": "1"}).status_code == 403
    assert client.post(f"/jobs/{job.pk}/cancel/").status_code == 403
    assert client.get(f"/jobs/{job.pk}/").status_code == 403
    assert Job.objects.get(pk=job.pk).status == Job.QUEUED


def test_it_launches_a_critique_job_from_the_form(client_for, tau_project, sent):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:3])
    response = client_for("researcher").post("/jobs/new/critique/", {
        "trajectory_ids": ", ".join(map(str, ids)), "backend": "hf", "batch_size": 8, "steps": "last",
        "max_steps": 50, "k": 1, "mode": "sectioned", "temperature": 0, "seed": 3, "chunk_size": 4,
        "calibrate_verdicts": "on"})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.kind == "critique" and job.selection["trajectory_ids"] == ids
    assert job.config["steps"] == "last" and job.config["seed"] == 3 and job.config["checkpoint"] is None


@pytest.mark.parametrize("data, field, message", [
    ({"trajectory_ids": "1, two"}, "trajectory_ids", "expected trajectory ids separated by commas"),
    ({"trajectory_ids": "999999"}, "trajectory_ids", "no trajectory with id 999999"),
    ({"trajectory_ids": ""}, "trajectory_ids", "choose trajectories"),
    ({"k": 2, "temperature": 0}, "temperature", "k &gt; 1 futures need sampling"),
    ({"backend": "openai"}, "endpoint_model", "needs the endpoint&#x27;s model name"),
    ({"steps": "middle"}, "steps", "expected all, first, last"),
    ({"chunk_size": 0}, "chunk_size", "greater than or equal to 1"),
])
def test_it_shows_what_is_wrong_with_a_launch_and_creates_nothing(client_for, tau_project, data, field, message):
    first = tau_project.trajectories.order_by("id").first().pk
    form = {"trajectory_ids": str(first), "backend": "hf", "batch_size": 8, "steps": "all", "max_steps": 10,
            "k": 1, "mode": "sectioned", "temperature": 0, "seed": 0, "chunk_size": 4, **data}
    response = client_for("researcher").post("/jobs/new/critique/", form)
    page = response.content.decode()
    assert response.status_code == 400 and not Job.objects.exists()
    rows = [row for row in page.split('<tr class="has-error">')[1:]]
    assert len(rows) == 1, "exactly one field is marked"
    row = rows[0].split("</tr>")[0]
    assert f'name="{field}"' in row and message in row  # the message sits on the field it is about


def test_it_carries_the_trajectory_list_filter_into_the_launch_form(client_for, tau_project, sent):
    client = client_for("researcher")
    page = client.get(f"/projects/{tau_project.slug}/?outcome=failure").content.decode()
    assert f"/jobs/new/critique/?project={tau_project.slug}&amp;outcome=failure" in page
    form = client.get(f"/jobs/new/critique/?project={tau_project.slug}&outcome=failure&sort=newest").content.decode()
    assert f'value="project={tau_project.slug}&amp;outcome=failure"' in form and "outcome = failure" in form
    response = client.post("/jobs/new/critique/", {"filter": f"project={tau_project.slug}&outcome=failure",
                                                   "backend": "hf", "batch_size": 8, "steps": "first",
                                                   "max_steps": 10, "k": 1, "mode": "sectioned",
                                                   "temperature": 0, "seed": 0, "chunk_size": 4})
    assert response.status_code == 302
    failed = set(tau_project.trajectories.filter(success=False).values_list("id", flat=True))
    assert set(Job.objects.get().selection["trajectory_ids"]) == failed


def test_it_polls_a_running_job_and_stops_polling_when_it_ends(client_for, job):
    client = client_for("researcher")
    live = client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert live.lstrip().startswith('<section id="job-live"') and 'hx-trigger="every 2s"' in live
    assert "<html" not in live
    lifecycle.claim(job.pk, "w:1")
    lifecycle.do_update(job.pk, "w:1", progress_done=1, progress_total=2, metrics=[
        {"episode": 1, "reward": -20.0}, {"episode": 2, "reward": -5.0}])
    live = client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="job-progress">1/2<' in live and "<polyline" in live and "reward over episode" in live
    lifecycle.do_finish(job.pk, "w:1", Job.SUCCEEDED, outputs={"critiques": 2})
    live = client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in live and "succeeded" in live


def test_it_cancels_and_retries_from_the_job_page(client_for, job, sent):
    client = client_for("researcher")
    response = client.post(f"/jobs/{job.pk}/cancel/", follow=True)
    assert "cancelled" in response.content.decode() and Job.objects.get(pk=job.pk).status == Job.CANCELLED
    response = client.post(f"/jobs/{job.pk}/retry/", follow=True)
    assert Job.objects.get(pk=job.pk).status == Job.QUEUED and "queued again" in response.content.decode()
    response = client.post(f"/jobs/{job.pk}/retry/", follow=True)
    assert "only failed or cancelled jobs can be retried" in response.content.decode()


def test_it_lists_jobs_by_kind_status_and_user(client_for, job, personas):
    lifecycle.check_create_job(personas["admin"], "rollout", {"env": "math", "tasks": 1})
    client = client_for("researcher")
    assert client.get("/jobs/?kind=rollout").content.decode().count('class="job-') == 1
    assert client.get("/jobs/?status=queued").content.decode().count('class="job-') == 2
    assert client.get("/jobs/?user=researcher").content.decode().count('class="job-') == 1
    assert client.get("/jobs/?status=failed").content.decode().count('class="job-') == 0


def test_it_shows_critiques_on_their_steps_escaped_with_job_and_checkpoint(client_for, job, tau_project):
    checkpoint = Checkpoint.objects.create(name="critic-1", path="/models/critic-1")
    trajectory = tau_project.trajectories.get(pk=job.selection["trajectory_ids"][0])
    StepCritique.objects.create(trajectory=trajectory, step_index=0, job=job, checkpoint=checkpoint,
                                verdict="harmful", success_prob=0.2, parse_ok=True, prompt_id="evaluator@1234",
                                record={"predicted_future": "<script>alert(1)</script> the user leaves",
                                        "reasoning": "no confirmation", "suggestion": "ask first"})
    page = client_for("reviewer").get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; the user leaves" in page and "<script>alert(1)" not in page
    assert "harmful" in page and "critic-1" in page and f"job {job.pk}" in page
    assert "/jobs/new/critique/" not in page  # non-researchers see critiques, not the launch button
    page = client_for("researcher").get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert f'href="/jobs/{job.pk}/"' in page and f"/jobs/new/critique/?trajectory={trajectory.pk}" in page


def test_it_lists_checkpoints_with_their_rollouts(client_for, personas):
    parent = Checkpoint.objects.create(name="smollm2", path="/m/base", kind="base")
    child = Checkpoint.objects.create(name="critic-1", path="/m/c1", parent=parent, kind="critic")
    Checkpoint.objects.create(name="critic-1-ema", path="/m/c1-ema", ema_of=child)
    Job.objects.create(kind="rollout", status=Job.SUCCEEDED, checkpoint=child, config={"env": "math"},
                       outputs={"success_rate": 0.125}, created_by=personas["researcher"])
    page = client_for("researcher").get("/checkpoints/").content.decode()
    assert page.count('<tr id="checkpoint-') == 3
    row = page.split(f'<tr id="checkpoint-{child.pk}">')[1].split("</tr>")[0]
    assert "smollm2" in row and "math</a>: success 0.125" in row
    ema_row = page.split("critic-1-ema")[1].split("</tr>")[0]
    assert "critic-1" in ema_row  # the EMA target names the checkpoint it follows


@pytest.mark.parametrize("kind", ["critique", "backup", "refine", "rollout", "evaluate", "train-critic",
                                  "distill-policy", "nlac-iteration", "export", "supervised-rollout",
                                  "replay-critic", "critic-data"])
def test_it_shows_a_launch_form_for_every_kind(client_for, kind):
    page = client_for("researcher").get(f"/jobs/new/{kind}/")
    assert page.status_code == 200 and 'id="launch-form"' in page.content.decode()


def test_it_launches_a_train_critic_job_on_a_chosen_base(client_for, tau_project, sent):
    base = Checkpoint.objects.create(name="critic-0", path="/m/critic-0")
    first = tau_project.trajectories.order_by("id").first().pk
    response = client_for("researcher").post("/jobs/new/train-critic/", {
        "trajectory_ids": str(first), "checkpoint": base.pk, "source": "targets", "max_steps": 5, "epochs": 1,
        "learning_rate": 1e-4, "per_device_batch_size": 2, "max_length": 512, "lora": "on", "lora_r": 8,
        "seed": 0})
    assert response.status_code == 302
    job = Job.objects.get()
    assert job.kind == "train-critic" and job.checkpoint == base and job.config["lora"] is True
    assert job.config["checkpoint"] == base.pk and job.config["lora_r"] == 8


def test_it_shows_outputs_and_settings_as_readable_lines_never_python_reprs(client_for, job):
    """Verdict counts, sampling settings, None and booleans read as words and numbers on the job page and the
    job list (issue 21: no ``{'`` and no ``None`` shown as text)."""
    import re

    lifecycle.claim(job.pk, "w:1")
    lifecycle.do_finish(job.pk, "w:1", Job.SUCCEEDED, outputs={
        "verdicts": {"optimal": 11, "suboptimal": 4}, "sampling": {"temperature": 0.7, "top_p": None},
        "stopped_early": False, "checkpoint_produced": None, "steps": [1, 2, 3], "note": "<b>x</b>"})
    client = client_for("researcher")
    for url in (f"/jobs/{job.pk}/", "/jobs/"):
        page = client.get(url).content.decode()
        text = re.sub(r"<[^>]+>", " ", page)
        assert "{'" not in text and "{&#x27;" not in page and not re.search(r"\bNone\b", text), url
    detail = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "optimal 11 · suboptimal 4" in detail  # (PostgreSQL's jsonb orders keys by length, then by name)
    assert re.search(r"<td>(temperature 0.7 · top_p –|top_p – · temperature 0.7)</td>", detail)
    assert "<td>no</td>" in detail and "<td>1, 2, 3</td>" in detail
    assert "&lt;b&gt;x&lt;/b&gt;" in detail and "<b>x</b>" not in detail
