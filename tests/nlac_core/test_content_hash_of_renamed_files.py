"""The content hash names the episode, not the file it came in: a tau-bench file's name is only a default label
for the source model, so a renamed copy hashes the same, while a model name given on purpose still counts."""

from __future__ import annotations

import shutil

import pytest

from nlac_core.formats import nlac_jsonl, read
from nlac_core.records import Message, TaskRecord, TrajectoryRecord
from tests.conftest import TAU_GPT4O, needs_shared

pytestmark = needs_shared


def hashes(path, source_model: str = "") -> list[str]:
    return [item.record.content_hash() for item in read(path, source_model=source_model)]


@pytest.fixture(scope="module")
def renamed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("renamed")
    copies = [folder / "gpt-4o-airline .json", folder / "a copy of the run.json"]
    for copy in copies:
        shutil.copyfile(TAU_GPT4O, copy)
    return copies


def test_it_hashes_a_renamed_copy_of_a_tau_bench_file_like_the_original(renamed):
    original = hashes(TAU_GPT4O)
    assert len(set(original)) == 200
    for copy in renamed:
        assert hashes(copy) == original, copy.name


def test_it_keeps_the_file_name_as_the_default_source_model_label(renamed):
    first = next(read(renamed[0])).record
    assert first.source_model == "gpt-4o-airline " and first.source_model_from_file_name
    given = next(read(renamed[0], source_model="gpt-4o-2024-08-06")).record
    assert given.source_model == "gpt-4o-2024-08-06" and not given.source_model_from_file_name


def test_it_makes_a_different_run_of_a_model_name_given_on_purpose(renamed):
    default = set(hashes(TAU_GPT4O))
    given = hashes(renamed[1], source_model="gpt-4o-2024-08-06")
    assert not default & set(given)
    assert hashes(TAU_GPT4O, source_model="gpt-4o-2024-08-06") == given
    assert not set(hashes(TAU_GPT4O, source_model="claude")) & set(given)


def test_it_keeps_the_hashes_of_records_whose_source_model_was_not_a_file_name():
    """Hashes already stored (every row but the file-name defaults) stay valid: pinned from before the fix."""
    given = hashes(TAU_GPT4O, source_model="gpt-4o")
    assert given[0] == "82a78b2c5b5a590d52483b953fbe46434ef6514c5391b9bc113fbce4c1214acf"
    assert given[199] == "e1b8e75fbd338202a9ae21b3fa7a79cde068af012d298c23c177de1c5ef07c8d"
    made = TrajectoryRecord(task=TaskRecord(external_id="t1", instruction="do"), source_model="m", reward=1,
                            messages=(Message(role="user", content="hi"), Message(role="assistant", content="ok")))
    assert made.content_hash() == "5c78ce005ad26b36373d4bc6d07a7752adb8dc3a9a84f1051fd399a41dabc610"
    assert "source_model_from_file_name" not in nlac_jsonl.dumps(made)


def test_it_round_trips_the_file_name_default_through_our_jsonl(renamed):
    records = [item.record for item in read(renamed[1])]
    again = nlac_jsonl.loads_all("\n".join(nlac_jsonl.dumps(r) for r in records))
    assert again == records
    assert [r.content_hash() for r in again] == hashes(TAU_GPT4O)
