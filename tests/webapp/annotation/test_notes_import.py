"""Human notes from a CSV keyed by simulation id attach to the right trajectories; a file with a row
that matches nothing, or a malformed one, is refused with the line named and changes nothing."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from webapp.annotation.models import AuditEvent, Note


def upload(client, project, text: str, name="notes.csv"):
    return client.post(f"/projects/{project.slug}/notes/",
                       {"file": SimpleUploadedFile(name, text.encode(), content_type="text/csv")})


def test_it_attaches_notes_to_the_trajectories_of_their_simulation_ids(client_for, project, trajectory):
    other = project.trajectories.exclude(pk=trajectory.pk).first()
    csv_text = ("simulation_id,step,note,author\n"
                f"{trajectory.external_id},1,\"Agent should have refused, quoting the policy\",dana\n"
                f"{other.external_id},,<script>alert(1)</script> user was confused,lee\n")
    response = upload(client_for("researcher"), project, csv_text)
    assert response.status_code == 302
    note = Note.objects.get(trajectory=trajectory)
    assert note.step_index == 1 and note.author_name == "dana" and note.source_line == 2
    assert Note.objects.get(trajectory=other).step_index is None
    assert AuditEvent.objects.filter(action="notes.import").count() == 1
    page = client_for("researcher").get(f"/trajectories/{other.pk}/steps/0/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; user was confused" in page and "<script>alert(1)" not in page


def test_it_refuses_a_file_with_a_row_that_matches_nothing_and_imports_none(client_for, project, trajectory):
    csv_text = (f"simulation_id,note\n{trajectory.external_id},fine\nno-such-simulation,lost note\n"
                f"{trajectory.external_id},also fine\n")
    response = upload(client_for("researcher"), project, csv_text)
    body = response.content.decode()
    assert response.status_code == 400
    assert "line 3: no trajectory with simulation_id &#x27;no-such-simulation&#x27;" in body
    assert not Note.objects.exists()


def test_it_names_the_line_and_column_of_malformed_rows(client_for, project, trajectory):
    client = client_for("researcher")
    cases = {"id,note\nx,y\n": "no key column", f"simulation_id,comment\n{trajectory.external_id},\n": "line 2",
             f"simulation_id,note,step\n{trajectory.external_id},n,two\n": "not a step number",
             f"simulation_id,note,step\n{trajectory.external_id},n,999\n": "has no agent step 999",
             "": "file is empty", "simulation_id,note\n": "no notes after the header"}
    for text, expected in cases.items():
        response = upload(client, project, text)
        assert response.status_code == 400 and expected in response.content.decode(), (text, expected)
    assert not Note.objects.exists()


def test_it_lets_only_researchers_import_notes(client_for, project):
    assert client_for("annotator").get(f"/projects/{project.slug}/notes/").status_code == 403
    assert client_for("researcher").get(f"/projects/{project.slug}/notes/").status_code == 200


def test_it_adds_nothing_when_the_same_notes_are_imported_again_and_says_so(client_for, project, trajectory):
    client = client_for("researcher")
    other = project.trajectories.exclude(pk=trajectory.pk).first()
    csv_text = ("simulation_id,step,note,author\n"
                f"{trajectory.external_id},1,Agent should have refused,dana\n"
                f"{trajectory.external_id},,The user was confused,lee\n"
                f"{other.external_id},0,Wrong tool,lee\n")
    upload(client, project, csv_text)
    assert Note.objects.count() == 3
    again = upload(client, project, csv_text, name="notes (copy).csv")
    assert again.status_code == 302
    assert Note.objects.count() == 3
    page = client.get(again.url).content.decode()
    assert "Imported 0 notes" in page and "3 were already imported" in page
    # One note changed, the rest the same (and keyed by trajectory id this time): just that one is added.
    changed = ("trajectory_id,step,note,author\n"
               f"{trajectory.pk},1,Agent should have refused,dana\n"
               f"{trajectory.pk},,The user was confused at first,lee\n"
               f"{other.pk},0,Wrong tool,lee\n")
    third = upload(client, project, changed)
    assert Note.objects.count() == 4
    assert "Imported 1 note on 1 trajectory; 2 were already imported" in client.get(third.url).content.decode()
    assert Note.objects.filter(text="The user was confused at first").count() == 1
    assert AuditEvent.objects.filter(action="notes.import").count() == 2  # nothing added, nothing to audit
