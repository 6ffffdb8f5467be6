"""Snapshot records, the split by task, the critic-target priority, and the exports read back by their consumers."""

from __future__ import annotations

import io
import json

import pytest

from nlac_core import datasets as ds
from nlac_core.formats import dataset_exports as ex
from nlac_core.formats import tau_bench
from nlac_core.records import to_dict
from tests.conftest import TAU_ERROR, TAU_GPT4O, needs_shared


def _sft(n: int, split: str = "train") -> dict:
    return {"prompt": [{"role": "system", "content": "You judge actions."},
                       {"role": "user", "content": f"step {n}: <b>{{braces}}</b> é"}],
            "completion": [{"role": "assistant", "content": f"FUTURE: it works {n}\nOUTCOME: success"}],
            "split": split, "source": "gold", "provenance": {"revision": n, "prompt_id": "evaluator@1"}}


def test_it_splits_by_task_without_leakage_and_reproducibly():
    keys = [f"task-{i}" for i in range(2000)]
    a = ds.split_tasks(keys, (0.8, 0.1, 0.1), seed=3)
    assert set(a) == set(keys) and set(a.values()) == {"train", "validation", "test"}
    share = sum(v == "train" for v in a.values()) / len(keys)
    assert 0.77 < share < 0.83
    assert ds.split_tasks(list(reversed(keys)) + keys[:5], (0.8, 0.1, 0.1), seed=3) == a  # order, duplicates
    assert ds.split_tasks(keys, (0.8, 0.1, 0.1), seed=4) != a
    assert set(ds.split_tasks(keys, (1, 0, 0)).values()) == {"train"}
    # a task keeps its split when other tasks come and go (v1 -> v2 of a dataset cannot leak)
    grown = ds.split_tasks(keys[:1500] + [f"new-{i}" for i in range(700)], (0.8, 0.1, 0.1), seed=3)
    assert all(grown[k] == a[k] for k in keys[:1500])
    with pytest.raises(ValueError, match="split fractions"):
        ds.split_tasks(keys, (0, 0, 0))
    with pytest.raises(ValueError, match="split fractions"):
        ds.split_tasks(keys, (0.5, -0.1, 0.6))


def test_it_chooses_the_critic_target_in_priority_order():
    every = ds.Candidates(gold="g", submitted="s", bellman="b", model_critique="m")
    assert ds.choose_critic_target(every) == "gold"
    no_gold = ds.Candidates(submitted="s", bellman="b", model_critique="m")
    assert ds.choose_critic_target(no_gold) == "bellman"  # submitted is opt-in
    assert ds.choose_critic_target(no_gold, include_submitted=True) == "submitted"
    only_model = ds.Candidates(model_critique="m")
    assert ds.choose_critic_target(only_model) is None
    assert ds.choose_critic_target(only_model, include_model_critiques=True) == "model_critique"
    assert ds.choose_critic_target(ds.Candidates(bellman="b"), human_only=True) is None


def test_it_renders_a_human_critique_like_a_model_critique():
    human = ds.HumanCritique("The user gets a refund. ", "success", "optimal", "It checks first.", "")
    assert human.render() == ("FUTURE: The user gets a refund.\nOUTCOME: success\nVERDICT: optimal\n"
                              "REASON: It checks first.\nSUGGESTION: ")


def test_it_writes_chat_and_prompt_completion_jsonl():
    out = io.StringIO()
    assert ex.write_jsonl([_sft(1), _sft(2)], out) == 2
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [m["role"] for m in lines[0]["messages"]] == ["system", "user", "assistant"]
    assert lines[1]["messages"][-1]["content"].startswith("FUTURE: it works 2")
    out = io.StringIO()
    ex.write_jsonl([_sft(1)], out, variant="prompt_completion")
    line = json.loads(out.getvalue())
    assert set(line) == {"prompt", "completion"} and line["completion"][0]["role"] == "assistant"


def test_it_writes_parquet_that_pyarrow_reads(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    assert ex.write_parquet((_sft(n) for n in range(12_345)), path) == 12_345
    table = pq.read_table(path)
    assert table.num_rows == 12_345 and pq.ParquetFile(path).num_row_groups == 3  # one per batch of 5000
    row = table.slice(7, 1).to_pylist()[0]
    assert row["messages"][1]["content"] == "step 7: <b>{braces}</b> é"
    assert json.loads(row["provenance"]) == {"revision": 7, "prompt_id": "evaluator@1"}


def test_it_writes_a_datasets_directory_that_load_from_disk_reads(tmp_path):
    import datasets

    records = {"train": [_sft(n) for n in range(5)], "validation": [], "test": [_sft(9, "test")]}
    counts = ex.write_hf_dataset(lambda split: records[split], tmp_path / "hf")
    assert counts == {"train": 5, "test": 1}
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    assert set(loaded) == {"train", "test"} and len(loaded["train"]) == 5
    assert loaded["test"][0]["completion"][0]["content"].startswith("FUTURE: it works 9")


@needs_shared
@pytest.mark.parametrize("path", [TAU_GPT4O, TAU_ERROR], ids=["gpt-4o", "error-record"])
def test_it_writes_tau_bench_results_that_read_back_to_the_same_episodes(tmp_path, path):
    originals = [item.record for item in tau_bench.read(path)][:25]
    out = tmp_path / "snapshot.json"  # whatever its name: a file name is only a label, not part of the hash
    with out.open("w", encoding="utf-8") as f:
        assert ex.write_tau_bench((to_dict(r) for r in originals), f) == len(originals)
    again = [item.record for item in tau_bench.read(out)]
    assert [r.content_hash() for r in again] == [r.content_hash() for r in originals]


@needs_shared
def test_it_writes_trajectories_as_chat_with_the_tools_they_called(tmp_path):
    record = next(item.record for item in tau_bench.read(TAU_GPT4O))
    out = io.StringIO()
    ex.write_trajectories_chat([to_dict(record)], out)
    line = json.loads(out.getvalue())
    called = {tc["function"]["name"] for m in line["messages"] for tc in m.get("tool_calls", [])}
    assert called and called == {t["function"]["name"] for t in line["tools"]}
    call = next(m for m in line["messages"] if m.get("tool_calls"))["tool_calls"][0]
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
