"""The step page over HTTP: context, critiques, strip, editor; saves (plain and htmx), conflicts,
bad input, drafts and the logged-out round trip."""

from __future__ import annotations

from tests.webapp.annotation.conftest import add_critique, fields
from webapp.annotation.models import Annotation, Draft, Revision
from webapp.annotation.services import revisions
from webapp.annotation.services.revisions import Target

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def url(trajectory, step, suffix=""):
    return f"/trajectories/{trajectory.pk}/steps/{step}/{suffix}"


def post_fields(critique, base=None, **changes):
    data = {**fields(**changes), "critique": critique.pk, "base_revision": base or ""}
    return {k: v for k, v in data.items()}


def test_it_shows_the_step_its_context_what_happened_next_and_the_critiques(client_for, trajectory, critiques):
    page = client_for("researcher").get(url(trajectory, 1)).content.decode()
    assert "Before the step" in page and "What actually happened next" in page and "Final outcome" in page
    assert f"critique {critiques[1].pk}" in page and "the user confirms and the booking is changed" in page
    assert "evaluator@abcd1234" in page and "temperature" in page  # provenance: prompt id and sampling
    assert 'data-step-cell="0"' in page and 'data-step-cell="3"' in page  # the whole trajectory's strip
    assert 'id="revision-form"' in page and 'name="base_revision" value=""' in page


def test_it_saves_with_a_plain_form_and_shows_the_diff_after_a_reload(client_for, trajectory, critiques):
    client = client_for("researcher")
    response = client.post(url(trajectory, 1, "save/"), post_fields(critiques[1], reasoning="the fare rules forbid it"))
    assert response.status_code == 302
    revision = Revision.objects.get()
    page = client.get(response["Location"]).content.decode()
    assert f"Saved revision {revision.pk}" in page
    assert "<del>it did not check </del>the fare rules<ins> forbid it</ins>" in page
    assert f'name="base_revision" value="{revision.pk}"' in page


def test_it_saves_in_place_with_htmx(client_for, trajectory, critiques):
    client = client_for("researcher")
    response = client.post(url(trajectory, 0, "save/"), post_fields(critiques[0]), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<div id="editor"') and "<html" not in body
    assert "Saved revision" in body


def test_it_answers_a_stale_save_with_the_conflict_view_and_keeps_the_text(client_for, personas, trajectory,
                                                                              critiques):
    client = client_for("researcher")
    client.post(url(trajectory, 0, "save/"), post_fields(critiques[0], reasoning="base text"))
    first = Revision.objects.get()
    revisions.check_save_revision(personas["researcher"], Target(trajectory, 0, critiques[0]),
                                  fields(reasoning="saved from another tab"), first.pk)
    response = client.post(url(trajectory, 0, "save/"), post_fields(critiques[0], first.pk, reasoning="my tab's text"),
                           HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 409 and 'id="conflict"' in body
    assert "saved from another tab" in body and "my tab&#x27;s text" in body
    assert Revision.objects.count() == 2  # nothing written
    assert Draft.objects.get(user=personas["researcher"]).fields["reasoning"] == "my tab's text"
    head = Annotation.objects.get().head_id
    assert f'name="base_revision" value="{head}"' in body  # the merge form saves on top of the winner


def test_it_rejects_bad_tool_call_json_naming_the_field_and_saving_nothing(client_for, trajectory, critiques):
    client = client_for("researcher")
    response = client.post(url(trajectory, 0, "save/"), {**post_fields(critiques[0]), "refined_tool_calls": "[{oops"})
    assert response.status_code == 400
    assert "refined_tool_calls: not usable JSON: malformed JSON" in response.content.decode()
    assert not Revision.objects.exists()
    # hostile JSON is refused with a message, never a 500: nesting past the limit, a 5,000-digit integer, NaN
    for text, said in (("[" * 600 + "]" * 600, "JSON nested too deeply (more than 512 levels)"),
                       ("[" * 15000, "JSON nested too deeply"),
                       ('[{"name": "x", "arguments": {"n": ' + "9" * 5000 + "}}]", "an integer of 5000 digits"),
                       ('[{"name": "x", "arguments": {"p": NaN}}]', "is not a number a database can store")):
        response = client.post(url(trajectory, 0, "save/"), {**post_fields(critiques[0]), "refined_tool_calls": text})
        assert response.status_code == 400 and said in response.content.decode(), text[:40]
    assert not Revision.objects.exists()
    response = client.post(url(trajectory, 0, "save/"),
                           {**post_fields(critiques[0]), "refined_tool_calls": '[{"arguments": {}}]'})
    assert "tool call 1: needs a &quot;name&quot; string" in response.content.decode()
    response = client.post(url(trajectory, 0, "save/"), {**post_fields(critiques[0]), "skipped": "1"})
    assert "skip_reason: say why" in response.content.decode() and not Revision.objects.exists()


def test_it_stores_a_refined_tool_call_and_renders_it_escaped(client_for, trajectory, critiques):
    client = client_for("researcher")
    hostile = HOSTILE.replace('"', "'")
    calls = '[{"name": "get_reservation_details", "arguments": {"reservation_id": "' + hostile + '"}}]'
    client.post(url(trajectory, 0, "save/"),
                {**post_fields(critiques[0], reasoning=HOSTILE), "refined_tool_calls": calls})
    revision = Revision.objects.get()
    assert revision.refined_tool_calls[0]["name"] == "get_reservation_details" and revision.reasoning == HOSTILE
    page = client.get(url(trajectory, 0)).content.decode()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_it_escapes_hostile_model_critique_text(client_for, trajectory):
    add_critique(trajectory, 0, future=HOSTILE)
    page = client_for("reviewer").get(url(trajectory, 0)).content.decode()
    assert "<script>alert" not in page and "&lt;script&gt;" in page


def test_it_keeps_a_draft_and_restores_it_on_reload(client_for, personas, trajectory, critiques):
    client = client_for("researcher")
    response = client.post(url(trajectory, 2, "draft/"), post_fields(critiques[2], reasoning="half typed"),
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Draft kept" in response.content.decode()
    page = client.get(url(trajectory, 2)).content.decode()
    assert "Restored your unsaved draft" in page and "half typed" in page
    client.post(url(trajectory, 2, "save/"), post_fields(critiques[2], reasoning="half typed, now done"))
    assert not Draft.objects.exists()


def test_it_keeps_text_posted_after_the_session_expired_through_the_login(client, personas, trajectory, critiques):
    client.force_login(personas["researcher"])
    client.get(url(trajectory, 1))
    client.logout()  # the session expired while the annotator was typing
    response = client.post(url(trajectory, 1, "save/"), post_fields(critiques[1], reasoning="typed while logged out"))
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")
    assert not Revision.objects.exists()
    response = client.post("/login/", {"username": "researcher", "password": "researcher-pw-123",
                                       "next": f"/trajectories/{trajectory.pk}/steps/1/?critique={critiques[1].pk}"})
    page = client.get(response["Location"]).content.decode()
    assert "typed while logged out" in page and "kept as your draft" in page
    assert Draft.objects.get(user=personas["researcher"]).fields["reasoning"] == "typed while logged out"


def test_it_redirects_htmx_posts_of_an_expired_session_to_the_login(client, trajectory, critiques):
    response = client.post(url(trajectory, 1, "draft/"), post_fields(critiques[1]), HTTP_HX_REQUEST="true")
    assert response.status_code == 401 and response["HX-Redirect"].startswith("/login/?next=")


def test_it_shows_the_history_with_diffs_and_restores(client_for, personas, trajectory, critiques):
    client = client_for("researcher")
    client.post(url(trajectory, 0, "save/"), post_fields(critiques[0], reasoning="alpha beta gamma"))
    first = Revision.objects.get()
    client.post(url(trajectory, 0, "save/"), post_fields(critiques[0], first.pk, reasoning="alpha delta gamma"))
    page = client.get(f"/annotations/{first.annotation_id}/").content.decode()
    assert "<del>beta</del>" in page and "<ins>delta</ins>" in page
    response = client.post(f"/revisions/{first.pk}/restore/",
                           {"base_revision": Annotation.objects.get().head_id}, follow=True)
    assert "Restored revision" in response.content.decode()
    assert Annotation.objects.get().head.reasoning == "alpha beta gamma" and Revision.objects.count() == 3


def test_it_shows_bellman_targets_and_refined_actions_rendered_like_actions(client_for, trajectory, critiques):
    from webapp.jobs.models import Checkpoint, Job, StepRefinement, StepTarget
    checkpoint = Checkpoint.objects.create(name="critic-7", path="/m/critic-7")
    job = Job.objects.create(kind="refine", status=Job.SUCCEEDED, config={})
    StepTarget.objects.create(trajectory=trajectory, step_index=1, job=job, checkpoint=checkpoint, terminal=False,
                              success_prob=0.3, prompt_id="bellman@1111",
                              record={"text": "the user is refused and leaves", "next_action_source": "data"})
    action = 'I will look it up.\nTOOL_CALL: {"name": "get_reservation_details", "arguments": {"id": "<b>X1</b>"}}'
    StepRefinement.objects.create(trajectory=trajectory, step_index=1, job=job, critique=critiques[1], valid=True,
                                  changed=True, checkpoint=checkpoint, prompt_id="refine@2222",
                                  record={"refined_action": action, "provenance": {"sampling": {"top_p": 0.9}}})
    page = client_for("reviewer").get(url(trajectory, 1)).content.decode()
    assert "the user is refused and leaves" in page and "bellman@1111" in page and "critic-7" in page
    assert "<code>get_reservation_details</code>" in page
    assert "&quot;id&quot;: &quot;&lt;b&gt;X1&lt;/b&gt;&quot;" in page
    assert "I will look it up." in page and "refine@2222" in page and "top_p" in page


def test_it_answers_malformed_ids_with_404_not_500(client_for, trajectory, critiques):
    client = client_for("researcher")
    assert client.get(url(trajectory, 1) + "?queue_item=abc").status_code == 404
    assert client.get(url(trajectory, 1) + "?queue_item=99999").status_code == 404
    assert client.get(url(trajectory, 999)).status_code == 404
    assert client.get(url(trajectory, 1) + "?critique=abc&annotation=x").status_code == 200
    assert client.post(url(trajectory, 1, "save/"), {**fields(), "critique": "abc"}).status_code == 400
    assert client.post(url(trajectory, 1, "save/"), {**fields(), "critique": 99999}).status_code == 404
