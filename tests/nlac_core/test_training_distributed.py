"""SFT on two processes (accelerate launch, DDP over gloo on these CPUs) against the same run on one.

Agreement, stated: on the same data and seed, one process with batch 2 and two processes with batch 1 each
(the same global batch; Accelerate deals the sampler's batches out round-robin) see the same examples per
step, and with the loss averaged over the tokens of all processes they log the same loss. Measured here the
two curves agree to about 1e-6; the test allows 1e-3 relative per step (float summation order differs).
"""

import math
import os

import pytest

from nlac_core.training import LaunchConfig, SFTRunConfig, TrainingError, train
from nlac_core.training.distributed import LAUNCH_DIR, launched_by
from tests.nlac_core.sft_helpers import records

pytestmark = pytest.mark.heavy

SETTINGS = {"max_steps": 4, "max_length": 256, "learning_rate": 1e-4, "seed": 0}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, embedded_model_dir):
    """The 1-process run (batch 2) and the 2-process run (batch 1 each), with their progress events."""
    out = {}
    for processes in (1, 2):
        events = []
        config = SFTRunConfig(per_device_batch_size=2 // processes, **SETTINGS)
        result = train(records(), embedded_model_dir, tmp_path_factory.mktemp(f"p{processes}"), config,
                       LaunchConfig(processes=processes), on_progress=events.append)
        out[processes] = result, events
    return out


def test_it_trains_on_two_processes_with_the_loss_curve_of_one(runs):
    (one, one_events), (two, two_events) = runs[1], runs[2]
    assert [e.step for e in two_events] == [1, 2, 3, 4] == [e.step for e in one_events]
    for a, b in zip(one_events, two_events, strict=True):
        assert math.isclose(a.loss, b.loss, rel_tol=1e-3), (a, b)
    assert two.metrics["processes"] == 2 and one.metrics["processes"] == 1
    assert two.metrics["tokens"] == one.metrics["tokens"] > 0  # counted over both processes
    assert math.isclose(two.metrics["train_loss"], one.metrics["train_loss"], rel_tol=1e-3)
    assert two.metrics["stopped_early"] is False and two.manifest.metrics["steps"] == 4


def test_it_saves_a_two_process_checkpoint_that_loads_and_generates(runs):
    from nlac_core.backends.base import SamplingSpec
    from nlac_core.backends.hf import HFBackend

    result, _ = runs[2]
    assert not (result.checkpoint_dir / LAUNCH_DIR).exists() and not (result.checkpoint_dir / "trainer-state").exists()
    backend = HFBackend(model=str(result.checkpoint_dir))
    (completion,) = backend.generate([[{"role": "user", "content": "Cancel reservation NO6JO3, please."}]],
                                     SamplingSpec(max_new_tokens=12))
    assert completion.text.strip() and completion.completion_tokens > 0
    assert launched_by(os.getpid()) == []


def test_it_stops_every_process_on_a_stop_request_and_resumes_from_there(tmp_path, embedded_model_dir):
    config = SFTRunConfig(per_device_batch_size=1, save_steps=100, **{**SETTINGS, "max_steps": 6})
    events = []
    stopped = train(records(), embedded_model_dir, tmp_path, config, LaunchConfig(processes=2),
                    on_progress=events.append, should_stop=lambda: bool(events))
    assert stopped.metrics["stopped_early"] is True and 1 <= stopped.metrics["steps"] < 6
    assert launched_by(os.getpid()) == []  # the launcher, torchrun's agent and both ranks are gone
    assert (tmp_path / "trainer-state").is_dir()

    resumed_events = []
    done = train(records(), embedded_model_dir, tmp_path, config, LaunchConfig(processes=2),
                 on_progress=resumed_events.append)
    assert done.metrics["stopped_early"] is False and done.metrics["steps"] == 6
    assert done.metrics["resumed_from_step"] == stopped.metrics["steps"]
    assert [e.step for e in resumed_events] == list(range(stopped.metrics["steps"] + 1, 7))
    assert launched_by(os.getpid()) == []


def test_it_kills_the_whole_process_tree_when_the_stop_is_not_honoured_in_time(tmp_path, embedded_model_dir):
    """A stop asked for as soon as both ranks run (still loading the model, outside the training loop), with no
    grace: the launcher and both ranks are killed at once."""
    seen = []

    def ranks_up() -> bool:
        seen.append(len(launched_by(os.getpid())))
        return seen[-1] >= 3  # the launcher (torchrun's agent runs inside it) and two ranks

    with pytest.raises(TrainingError, match="did not stop within 0 s"):
        train(records(), embedded_model_dir, tmp_path, SFTRunConfig(per_device_batch_size=1, **SETTINGS),
              LaunchConfig(processes=2), should_stop=ranks_up, stop_grace_s=0)
    assert max(seen) >= 3 and launched_by(os.getpid()) == []


def test_it_trains_on_two_processes_from_the_command_line(tmp_path):
    import json
    import subprocess
    import sys

    from nlac_core.checkpoints import read_manifest
    from tests.conftest import ROOT

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records()))
    done = subprocess.run([sys.executable, "-m", "nlac_core", "train", str(data), "--out", str(tmp_path / "ckpt"),
                           "--processes", "2", "--strategy", "ddp", "--max-steps", "2", "--batch-size", "1",
                           "--max-length", "256"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"checkpoint: {tmp_path / 'ckpt'}" in done.stdout and "steps: 2/2" in done.stdout
    assert "step 2/2" in done.stderr  # the main rank's progress, passed on by the caller
    assert read_manifest(tmp_path / "ckpt").metrics["processes"] == 2
