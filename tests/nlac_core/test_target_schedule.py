"""The target network's schedule (Polyak averaging or a hard copy every N updates) over five iterations on tiny
synthetic models, with the manifest's mixture (the weight of each checkpoint the target averages) checked
against the tensors themselves."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from nlac_core.checkpoints import read_manifest
from nlac_core.ema import TargetSchedule, base_share, init_target, update_target
from nlac_core.iteration import IterationConfig
from tests.nlac_core.test_ema import tiny

NAME = "model.layers.0.mlp.up_proj.weight"


def five_iterations(tmp_path, schedule: TargetSchedule):
    """base -> target; online_i (i = 1..5) are the trained checkpoints; the target updated after each."""
    base = tmp_path / "base"
    tensors = {0: tiny(base, 0)}
    target = init_target(base, tmp_path / "target-0")
    for i in range(1, 6):
        tensors[i] = tiny(tmp_path / f"online-{i}", i)
        target = update_target(target, tmp_path / f"online-{i}", schedule, out_dir=tmp_path / f"target-{i}")
    return base, target, tensors


@pytest.mark.parametrize("schedule, base_left", [
    (TargetSchedule("polyak", tau=0.05), 0.95 ** 5),  # the landed default: 77% base after five iterations
    (TargetSchedule("polyak", tau=0.5), 0.5 ** 5),
    (TargetSchedule("hard", every=1), 0.0),
    (TargetSchedule("hard", every=2), 0.0),  # copied at updates 2 and 4: online-4 exactly
    (TargetSchedule("hard", every=10), 1.0),  # not yet copied: still the base
])
def test_it_records_what_the_target_averages_and_the_tensors_agree(tmp_path, schedule, base_left):
    base, target, tensors = five_iterations(tmp_path, schedule)
    manifest = read_manifest(target)
    mixture = manifest.extra["mixture"]
    assert base_share(mixture, base) == pytest.approx(base_left, abs=1e-9)
    assert sum(mixture.values()) == pytest.approx(1.0, abs=1e-6)
    assert manifest.extra["ema_updates"] == 5 and manifest.extra["schedule"]["kind"] == schedule.kind
    expected = torch.zeros_like(tensors[0][NAME])
    for source, weight in mixture.items():
        i = 0 if source.endswith("/base") else int(source.rsplit("-", 1)[1])
        expected += weight * tensors[i][NAME]
    assert torch.allclose(load_file(target / "model.safetensors")[NAME], expected, atol=1e-5)


def test_it_copies_the_online_weights_exactly_on_a_hard_update(tmp_path):
    _, target, tensors = five_iterations(tmp_path, TargetSchedule("hard", every=2))
    got = load_file(target / "model.safetensors")
    assert torch.equal(got[NAME], tensors[4][NAME])  # byte for byte, not an average


@pytest.mark.parametrize("fields, message", [
    ({"kind": "soft"}, "target schedule: expected one of polyak, hard, got 'soft'"),
    ({"tau": 1.5}, "tau must be a number in [0, 1], got 1.5"),
    ({"kind": "hard", "every": 0}, "every must be an integer of at least 1, got 0"),
])
def test_it_refuses_a_bad_schedule(fields, message):
    with pytest.raises(ValueError) as caught:
        TargetSchedule(**fields)
    assert str(caught.value) == message
    iteration_fields = {{"kind": "target_schedule", "every": "target_every"}.get(k, k): v for k, v in fields.items()}
    with pytest.raises(ValueError):
        IterationConfig(**iteration_fields)
