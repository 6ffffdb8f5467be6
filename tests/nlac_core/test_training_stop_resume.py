"""A run asked to stop saves a flagged checkpoint and its trainer state; the next call resumes from that step."""

import pytest

from nlac_core.checkpoints import MANIFEST_NAME, read_manifest
from nlac_core.training import ResumeError, SFTRunConfig, train_sft
from tests.nlac_core.sft_helpers import records

pytestmark = pytest.mark.slow

CONFIG = SFTRunConfig(max_steps=2, per_device_batch_size=2, max_length=256, learning_rate=1e-4)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, embedded_model_dir):
    out = tmp_path_factory.mktemp("resume") / "ckpt"
    events, asked = [], []

    def should_stop():
        asked.append(True)
        return True

    result = train_sft(records(), embedded_model_dir, out, CONFIG, on_progress=events.append, should_stop=should_stop)
    return out, result, events, asked


def test_it_stops_after_the_first_step_with_the_checkpoint_saved(stopped):
    from transformers import AutoModelForCausalLM

    out, result, events, asked = stopped
    assert len(asked) == 1 and [e.step for e in events] == [1]
    assert result.metrics["steps"] == 1 and result.metrics["stopped_early"] is True
    assert read_manifest(out).metrics["stopped_early"] is True
    assert (out / "trainer-state" / "checkpoint-1" / "optimizer.pt").is_file()
    AutoModelForCausalLM.from_pretrained(out, local_files_only=True)


def test_it_refuses_to_resume_the_state_of_another_run(stopped, embedded_model_dir):
    out = stopped[0]
    with pytest.raises(ResumeError, match=r"ckpt: holds a checkpoint of another run \(different dataset_hash\); "
                                          r"pass resume=False"):
        train_sft(records()[:3], embedded_model_dir, out, CONFIG)
    assert (out / "trainer-state" / "checkpoint-1").is_dir()
    # A crash between the trainer's own save and the manifest leaves trainer state and no manifest:
    # that state is checked against the run too.
    manifest = out / MANIFEST_NAME
    manifest.rename(out / "manifest.aside")
    try:
        with pytest.raises(ResumeError, match=r"trainer-state: holds the trainer state of another run \(different "
                                              r"dataset_hash\); pass resume=False"):
            train_sft(records()[:3], embedded_model_dir, out, CONFIG)
    finally:
        (out / "manifest.aside").rename(manifest)
    assert (out / "trainer-state" / "checkpoint-1").is_dir()


def test_it_resumes_from_the_step_it_stopped_at(stopped, embedded_model_dir):
    out, first, _, _ = stopped
    events = []
    result = train_sft(records(), embedded_model_dir, out, CONFIG, on_progress=events.append)
    assert [e.step for e in events] == [2]
    metrics = result.metrics
    assert metrics["steps"] == 2 and metrics["resumed_from_step"] == 1 and metrics["stopped_early"] is False
    assert metrics["tokens"] > first.metrics["tokens"]  # the count carries over from the first session
    assert read_manifest(out).metrics == metrics
    assert not (out / "trainer-state").exists()
