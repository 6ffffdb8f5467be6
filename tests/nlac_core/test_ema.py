"""The EMA target update on tiny synthetic safetensors models: exact arithmetic, layouts, errors."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from nlac_core.checkpoints import CheckpointError, read_manifest
from nlac_core.ema import ema_update, init_target


def tiny(path, seed, tied=True, lm_head=False, dtype=torch.float32, shards=False, shape=(4, 3)):
    g = torch.Generator().manual_seed(seed)
    tensors = {"model.embed_tokens.weight": torch.randn(6, 3, generator=g).to(dtype),
               "model.layers.0.mlp.up_proj.weight": torch.randn(*shape, generator=g).to(dtype),
               "model.norm.weight": torch.randn(3, generator=g).to(dtype),
               "model.step_count": torch.tensor([seed], dtype=torch.int64)}
    if lm_head:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "tie_word_embeddings": tied}))
    (path / "tokenizer.json").write_text(json.dumps({"seed": seed}))
    (path / "nlac_manifest.json").write_text(json.dumps({"name": path.name, "base_model": "tiny", "parent": None}))
    if not shards:
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
        return tensors
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate((names[:2], names[2:])):
        shard = f"model-0000{i + 1}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, path / shard, metadata={"format": "pt"})
        weight_map.update({n: shard for n in part})
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return tensors


@pytest.fixture
def pair(tmp_path):
    return tmp_path / "target", tiny(tmp_path / "target", 1), tmp_path / "online", tiny(tmp_path / "online", 2)


@pytest.mark.parametrize("tau", [0.0, 1.0, 0.5])
def test_it_moves_the_target_towards_the_online_weights_exactly(tmp_path, pair, tau):
    target, old, online, new = pair
    out = ema_update(target, online, tau, out_dir=tmp_path / "out")
    got = load_file(out / "model.safetensors")
    assert set(got) == set(old)
    for name, value in got.items():
        if name == "model.step_count":  # integer buffers follow the online model, unless tau is 0
            assert torch.equal(value, old[name] if tau == 0 else new[name])
        else:
            expected = {0.0: old[name], 1.0: new[name], 0.5: (old[name] + new[name]) / 2}[tau]
            assert torch.equal(value, expected), name
    manifest = read_manifest(out)
    assert manifest.kind == "ema-target" and manifest.parent == str(target) and manifest.extra["tau"] == tau
    assert manifest.extra["twin_of"] == str(online) and manifest.base_model == "tiny"
    assert json.loads((out / "tokenizer.json").read_text()) == {"seed": 1}  # side files come from the target


def test_it_updates_the_target_in_place_and_counts_updates(pair):
    target, old, online, new = pair
    init_target(online, target)  # replace the old target with a copy of the online model
    assert read_manifest(target).extra["ema_updates"] == 0
    assert torch.equal(load_file(target / "model.safetensors")["model.norm.weight"], new["model.norm.weight"])
    assert ema_update(target, online, 0.05) == target.resolve()
    assert read_manifest(target).extra["ema_updates"] == 1
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_it_keeps_bf16_weights_in_bf16(tmp_path):
    old = tiny(tmp_path / "target", 1, dtype=torch.bfloat16)
    new = tiny(tmp_path / "online", 2, dtype=torch.bfloat16)
    got = load_file(ema_update(tmp_path / "target", tmp_path / "online", 0.25, tmp_path / "out") / "model.safetensors")
    name = "model.layers.0.mlp.up_proj.weight"
    assert got[name].dtype == torch.bfloat16
    assert torch.equal(got[name], (0.75 * old[name].float() + 0.25 * new[name].float()).to(torch.bfloat16))


def test_it_handles_sharded_models_with_the_targets_layout(tmp_path):
    old = tiny(tmp_path / "target", 1, shards=True)
    new = tiny(tmp_path / "online", 2)  # the online model is one file: layouts may differ
    out = ema_update(tmp_path / "target", tmp_path / "online", 0.5, tmp_path / "out")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    got = {}
    for shard in set(index["weight_map"].values()):
        got.update(load_file(out / shard))
    name = "model.embed_tokens.weight"
    assert set(got) == set(old) and torch.equal(got[name], (old[name] + new[name]) / 2)


def test_it_treats_a_tied_output_head_as_the_embedding(tmp_path):
    old = tiny(tmp_path / "target", 1, lm_head=True)
    new = tiny(tmp_path / "online", 2)  # tied and not saved
    got = load_file(ema_update(tmp_path / "target", tmp_path / "online", 0.5, tmp_path / "out") / "model.safetensors")
    expected = (old["model.embed_tokens.weight"] + new["model.embed_tokens.weight"]) / 2
    assert torch.equal(got["lm_head.weight"], expected) and torch.equal(got["model.embed_tokens.weight"], expected)


def test_it_refuses_models_of_another_shape_and_leaves_the_target_alone(tmp_path):
    tiny(tmp_path / "target", 1)
    tiny(tmp_path / "online", 2, shape=(5, 3))
    before = (tmp_path / "target" / "model.safetensors").read_bytes()
    with pytest.raises(CheckpointError, match=r"tensor 'model.layers.0.mlp.up_proj.weight': shape \[4, 3\] in .*"
                                              r"target but \[5, 3\] in .*online"):
        ema_update(tmp_path / "target", tmp_path / "online", 0.5)
    assert (tmp_path / "target" / "model.safetensors").read_bytes() == before


def test_it_refuses_models_with_other_tensors(tmp_path):
    tiny(tmp_path / "target", 1, tied=False)
    tiny(tmp_path / "online", 2, tied=False, lm_head=True)
    with pytest.raises(CheckpointError, match=r"not the same architecture: 1 tensor\(s\) only in the online model "
                                              r"\(lm_head.weight\)"):
        ema_update(tmp_path / "target", tmp_path / "online", 0.5)


def test_it_refuses_a_tau_outside_0_1_and_overwriting_the_online_model(pair):
    target, _, online, _ = pair
    for tau in (-0.1, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="tau must be a number in"):
            ema_update(target, online, tau)
    with pytest.raises(CheckpointError, match="would overwrite the online checkpoint"):
        ema_update(target, online, 0.5, out_dir=online)
