"""The full-text index stays true to the stored trajectories."""

import json

import pytest
from django.core.management import call_command

from webapp.trajectories import queries
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project


def import_words(tmp_path, name: str, word: str):
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": f"about {word} today"}]}) + "\n")
    assert do_import_file(path, do_get_or_create_project(name)).ok


def found(word: str) -> int:
    return queries.page({"q": word}).count


@pytest.mark.django_db(transaction=True)
def test_it_forgets_every_document_when_the_database_is_flushed(tmp_path):
    import_words(tmp_path, "before", "zebracorn")
    assert found("zebracorn") == 1
    call_command("flush", interactive=False, verbosity=0)
    import_words(tmp_path, "after", "narwhal")  # may get the id the old trajectory had
    assert found("zebracorn") == 0 and found("narwhal") == 1


@pytest.mark.django_db
def test_it_rebuilds_the_index_from_the_stored_messages(tmp_path, capsys):
    import_words(tmp_path, "a", "okapi")
    import_words(tmp_path, "b", "quokka")
    call_command("rebuild_search_index")
    assert "indexed 2 trajectories" in capsys.readouterr().out
    assert found("okapi") == 1 and found("quokka") == 1 and found("zebracorn") == 0


def test_it_leaves_the_shared_policy_out_of_the_documents():
    from nlac_core.records import Message, TaskRecord, ToolCall, TrajectoryRecord
    from webapp.trajectories import search

    record = TrajectoryRecord(task=TaskRecord(external_id="1"), messages=(
        Message(role="system", content="# Airline Agent Policy"),
        Message(role="user", content="change my flight"),
        Message(role="assistant", tool_calls=(ToolCall(id="c", name="get_reservation", arguments={"id": "MDCLVA"}),)),
    ))
    doc = search.document(record)
    assert "Policy" not in doc
    assert "change my flight" in doc and "get_reservation" in doc and "MDCLVA" in doc


@pytest.mark.django_db
@pytest.mark.parametrize("text,query,hit", [
    ("user mia_li_3668 asks", "mia_li_3668", True),
    ("user mia_li_3668 asks", "mia", True),  # an underscore cuts words, as SQLite's unicode61 does
    ("write to mia.li@example.com", "mia.li@example.com", True),
    ("write to mia.li@example.com", "example", True),
    ("Crème brûlée at the Café", "creme brulee cafe", True),  # case and accents dropped, in the text and the query
    ("a cafe", "CAFÉ", True),
    ("version 3.14 shipped", "14", True),
    ("refund policy", "refund zqxjnowhere", False),  # every word is needed
    ("Ελληνικά και 日本語", "ελληνικά", True),
    ("Ελληνικά και 日本語", "ελληνικα", False),  # unicode61 drops the accents of Latin letters only
])
def test_it_cuts_words_the_same_way_on_both_databases(tmp_path, text, query, hit):
    import_words(tmp_path, "words", text)
    assert found(query) == (1 if hit else 0)


@pytest.mark.django_db
def test_it_leaves_out_of_the_index_a_word_longer_than_postgresql_takes(tmp_path):
    import_words(tmp_path, "long", "x" * 3000 + " findable")  # PostgreSQL refuses a lexeme over 2,047 bytes
    assert found("findable") == 1
