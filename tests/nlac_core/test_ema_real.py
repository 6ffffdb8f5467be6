"""The EMA update on the real model: the embedded model averaged with a checkpoint trained from it."""

import pytest

from nlac_core.checkpoints import read_manifest
from nlac_core.ema import ema_update
from tests.nlac_core.sft_helpers import small_run

pytestmark = pytest.mark.slow


def test_it_averages_the_embedded_model_and_a_trained_checkpoint(tmp_path, tmp_path_factory, embedded_model_dir):
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    trained = small_run(tmp_path_factory, embedded_model_dir)[0].checkpoint_dir
    out = ema_update(embedded_model_dir, trained, 0.5, out_dir=tmp_path / "target")

    def tensor(directory, name):
        with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
            return f.get_tensor(name)

    for name in ("model.layers.7.self_attn.v_proj.weight", "model.embed_tokens.weight"):
        old, new, got = tensor(embedded_model_dir, name), tensor(trained, name), tensor(out, name)
        assert not torch.equal(old, new)
        assert torch.equal(got, (old + new) / 2), name
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied
    manifest = read_manifest(out)
    assert manifest.kind == "ema-target" and manifest.parent == str(embedded_model_dir.resolve())
    assert manifest.extra["twin_of"] == str(trained) and manifest.base_model == "smollm2-135m-instruct"
