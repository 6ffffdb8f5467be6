"""LoRA: adapters trained, merged into a plain model directory that transformers loads; the adapter kept."""

import pytest

from nlac_core.checkpoints import read_manifest
from tests.nlac_core.sft_helpers import small_run

pytestmark = pytest.mark.slow


def test_it_saves_a_merged_model_and_keeps_the_adapter(tmp_path_factory, embedded_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    result, events = small_run(tmp_path_factory, embedded_model_dir, name="sft-lora", lora=True, lora_r=4,
                               lora_alpha=8, learning_rate=1e-3)
    ckpt = result.checkpoint_dir
    assert [e.step for e in events] == [1, 2] and result.metrics["steps"] == 2
    assert (ckpt / "adapter" / "adapter_config.json").is_file()
    assert (ckpt / "adapter" / "adapter_model.safetensors").is_file()
    model = AutoModelForCausalLM.from_pretrained(ckpt, local_files_only=True)
    base = AutoModelForCausalLM.from_pretrained(embedded_model_dir, local_files_only=True)
    weights, base_weights = model.state_dict(), base.state_dict()
    assert not [k for k in weights if "lora" in k] and weights.keys() == base_weights.keys()
    name = "model.layers.3.mlp.down_proj.weight"
    assert weights[name].dtype == torch.float32
    assert not torch.equal(weights[name], base_weights[name])  # the adapter was merged in
    assert torch.equal(weights["model.norm.weight"], base_weights["model.norm.weight"])  # untouched by LoRA
    assert read_manifest(ckpt).config["lora"] is True
