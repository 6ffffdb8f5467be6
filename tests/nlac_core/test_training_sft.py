"""A real 2-step SFT of the embedded model: loss, progress, the saved checkpoint and its manifest."""

import json
import math

import pytest

from nlac_core.checkpoints import dataset_hash, read_manifest
from nlac_core.training import ResumeError, SFTRunConfig, train_sft
from tests.nlac_core.sft_helpers import records, small_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, embedded_model_dir):
    return small_run(tmp_path_factory, embedded_model_dir)


def test_it_trains_two_steps_with_a_finite_loss(run):
    result, _ = run
    metrics = result.metrics
    assert metrics["steps"] == 2 and metrics["total_steps"] == 2 and metrics["stopped_early"] is False
    assert math.isfinite(metrics["train_loss"]) and 0 < metrics["train_loss"] < 20
    assert metrics["tokens"] > 0 and metrics["tokens_per_s"] > 0 and metrics["runtime_s"] > 0


def test_it_reports_step_loss_and_tokens_per_second(run):
    _, events = run
    assert [e.step for e in events] == [1, 2] and {e.total_steps for e in events} == {2}
    assert all(math.isfinite(e.loss) and e.tokens_per_s > 0 for e in events)
    assert events[0].tokens < events[1].tokens and events[1].epoch > events[0].epoch


def test_it_writes_the_lineage_into_the_manifest(run, embedded_model_dir):
    result, _ = run
    manifest = read_manifest(result.checkpoint_dir)
    assert manifest == result.manifest
    assert manifest.base_model == "smollm2-135m-instruct"
    assert manifest.parent == str(embedded_model_dir.resolve())
    assert manifest.dataset_hash == dataset_hash(records())
    assert manifest.config == SFTRunConfig(max_steps=2, per_device_batch_size=2, max_length=256,
                                           learning_rate=1e-4).to_dict()
    assert manifest.kind == "policy+critic" and manifest.metrics == result.metrics
    assert manifest.size_bytes > 500_000_000 and manifest.extra["num_records"] == 4
    # a finished run keeps no optimizer state
    assert sorted(p.name for p in result.checkpoint_dir.iterdir() if p.is_dir()) == []


def test_it_saves_a_model_that_transformers_reloads_with_its_chat_template(run, embedded_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = run[0].checkpoint_dir
    tokenizer, base_tokenizer = (AutoTokenizer.from_pretrained(d, local_files_only=True)
                                 for d in (ckpt, embedded_model_dir))
    assert tokenizer.chat_template == base_tokenizer.chat_template
    assert tokenizer.pad_token == base_tokenizer.pad_token == "<|im_end|>"
    model = AutoModelForCausalLM.from_pretrained(ckpt, local_files_only=True)
    base = AutoModelForCausalLM.from_pretrained(embedded_model_dir, local_files_only=True)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(model.state_dict()[name], base.state_dict()[name])  # the weights did move
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied


def test_it_saves_a_model_the_hf_backend_generates_with(run):
    from nlac_core.backends.base import SamplingSpec
    from nlac_core.backends.hf import HFBackend

    backend = HFBackend(model=str(run[0].checkpoint_dir))
    (completion,) = backend.generate([[{"role": "user", "content": "Cancel reservation NO6JO3, please."}]],
                                     SamplingSpec(max_new_tokens=12))
    assert completion.text.strip() and completion.completion_tokens > 0


def test_it_returns_a_finished_checkpoint_without_training_again(run, embedded_model_dir):
    result, _ = run
    stamp = json.loads((result.checkpoint_dir / "nlac_manifest.json").read_text())["created"]
    events = []
    again = train_sft(records(), embedded_model_dir, result.checkpoint_dir, SFTRunConfig(**result.manifest.config),
                      on_progress=events.append, name=result.manifest.name)
    assert events == [] and again.metrics == result.metrics and again.manifest.created == stamp


def test_it_never_trains_over_the_checkpoint_of_another_run(run, embedded_model_dir):
    result, _ = run
    with pytest.raises(ResumeError, match=r"holds a checkpoint of another run \(different dataset_hash, config\); "
                                          r"pass resume=False to overwrite it"):
        train_sft(records()[:3], embedded_model_dir, result.checkpoint_dir, SFTRunConfig(max_steps=1))
    assert read_manifest(result.checkpoint_dir) == result.manifest
