"""The trajectory list: filters, htmx partials, keyset pagination, counts."""

import pytest

from tests.conftest import needs_shared
from webapp.trajectories.models import Trajectory

pytestmark = [needs_shared, pytest.mark.django_db]


def ids_on(response) -> list[int]:
    return [row["id"] for row in response.context["page"].rows]


def test_it_shows_the_project_summary_with_pass_hat_k(client_for, tau_project):
    body = client_for("reviewer").get(f"/projects/{tau_project.slug}/").content.decode()
    assert "pass^4" in body and "0.200" in body and "0.273" in body and "0.420" in body
    assert "200 trajectories" in body


def test_it_walks_every_trajectory_once_with_keyset_pages(client_for, tau_project):
    client = client_for("reviewer")
    url, seen = f"/projects/{tau_project.slug}/", []
    while url:
        response = client.get(url)
        seen += ids_on(response)
        nxt = response.context["next_url"]
        url = f"/projects/{tau_project.slug}/{nxt}" if nxt else None
    assert len(seen) == 200 and len(set(seen)) == 200
    assert seen == sorted(seen, reverse=True)


@pytest.mark.parametrize("sort", ["reward_desc", "reward_asc", "longest", "shortest", "oldest"])
def test_it_pages_through_every_sort_without_gaps(client_for, tau_project, sort):
    client = client_for("reviewer")
    base = f"/projects/{tau_project.slug}/"
    url, seen = f"{base}?sort={sort}&outcome=failure", []
    while url:
        response = client.get(url)
        seen += ids_on(response)
        url = base + response.context["next_url"] if response.context["next_url"] else None
    expected = Trajectory.objects.filter(project=tau_project, success=False).count()
    assert len(seen) == expected == 116 and len(set(seen)) == expected


def test_it_filters_by_outcome_task_termination_and_reward(client_for, tau_project):
    client = client_for("reviewer")
    base = f"/projects/{tau_project.slug}/"
    assert client.get(base + "?outcome=success").context["page"].count == 84
    assert client.get(base + "?task=7").context["page"].count == 4
    assert client.get(base + "?termination_reason=max_steps").context["page"].count == 5
    assert client.get(base + "?reward_min=1").context["page"].count == 84
    assert client.get(base + "?source_model=gpt-4o-airline").context["page"].count == 200
    assert client.get(base + "?source_model=nobody").context["page"].count == 0
    body = client.get(base).content.decode()  # the dropdowns offer what the project has
    for reason in ("max_steps", "transfer", "user_stop"):
        assert f'<option value="{reason}">' in body
    assert '<option value="gpt-4o-airline">' in body


def test_it_searches_the_text_of_messages(client_for, tau_project):
    client = client_for("reviewer")
    page = client.get(f"/projects/{tau_project.slug}/?q=mia_li_3668").context["page"]
    expected = Trajectory.objects.filter(project=tau_project, messages__content__icontains="mia_li_3668").distinct()
    assert page.count == expected.count() > 0
    assert {r["id"] for r in page.rows} <= set(expected.values_list("id", flat=True))


def test_it_finds_words_in_tool_arguments_and_needs_every_word(client_for, tau_project):
    client = client_for("reviewer")
    base = f"/projects/{tau_project.slug}/"
    with_arg = Trajectory.objects.filter(project=tau_project, messages__tool_calls__icontains="MDCLVA").distinct()
    assert client.get(base + "?q=MDCLVA").context["page"].count == with_arg.count() > 0
    both = client.get(base + "?q=MDCLVA+insurance").context["page"].count
    assert 0 < both <= with_arg.count()
    assert client.get(base + "?q=MDCLVA+zqxjnowhere").context["page"].count == 0


@pytest.mark.parametrize("q", ['"unbalanced', "NEAR(a b)", "a* OR b", "col:term", "((", "-", "'; DROP TABLE x; --"])
def test_it_treats_search_syntax_as_plain_words(client_for, tau_project, q):
    response = client_for("reviewer").get(f"/projects/{tau_project.slug}/", {"q": q})
    assert response.status_code == 200


def test_it_answers_htmx_with_only_the_results_partial(client_for, tau_project):
    client = client_for("reviewer")
    full = client.get(f"/projects/{tau_project.slug}/?outcome=failure")
    partial = client.get(f"/projects/{tau_project.slug}/?outcome=failure", HTTP_HX_REQUEST="true")
    assert b"<html" in full.content and b'id="results"' in full.content
    assert b"<html" not in partial.content and partial.content.lstrip().startswith(b'<section id="results">')
    assert b"116 trajectories" in partial.content


def test_it_ignores_a_tampered_cursor_and_a_bad_filter(client_for, tau_project):
    client = client_for("reviewer")
    response = client.get(f"/projects/{tau_project.slug}/?cursor=forged&reward_min=abc")
    assert response.status_code == 200
    assert b"were not understood" in response.content


def test_it_forgets_deleted_trajectories_in_search(client_for, tau_project):
    client = client_for("reviewer")
    url = f"/projects/{tau_project.slug}/?q=mia_li_3668"
    before = client.get(url).context["page"].count
    Trajectory.objects.filter(project=tau_project, task__external_id="0").delete()
    assert client.get(url).context["page"].count == before - 4
