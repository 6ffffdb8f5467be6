"""One full NLAC iteration on the real embedded model, tiny: 20 Questions, one game of two questions."""

import json

import pytest
from safetensors import safe_open

from nlac_core.backends import SamplingSpec
from nlac_core.critic import CritiqueConfig
from nlac_core.iteration import IterationConfig, run_iteration
from nlac_core.refine import RefineConfig

pytestmark = pytest.mark.slow


def test_it_runs_an_iteration_end_to_end_and_resumes_without_redoing_work(tmp_path, embedded_model_dir,
                                                                          embedded_backend):
    from nlac_core.bellman import BackupConfig

    config = IterationConfig(
        env="twenty_questions", tasks=1, trials=1, max_turns=2, policy_tokens=24, seed=3, tau=0.5,
        critique=CritiqueConfig(future_tokens=24, text_tokens=16),
        backup=BackupConfig(action_tokens=24, future_tokens=24, target_tokens=24, max_state_chars=800),
        refine=RefineConfig(max_new_tokens=24),
        sft={"max_steps": 2, "per_device_batch_size": 2, "max_length": 384, "learning_rate": 1e-5})
    loaded = {str(embedded_model_dir): embedded_backend}

    def load(path):
        if path not in loaded:
            from nlac_core.backends.hf import HFBackend
            loaded[path] = HFBackend(model=path)
        return loaded[path]

    phases = []
    result = run_iteration(tmp_path / "it1", embedded_model_dir, embedded_model_dir, config, load,
                           oracle=embedded_backend, on_progress=lambda p, d, t: phases.append(p))
    assert result.trajectories == 1 and result.steps == 2
    assert {"rollout", "backup", "critique", "refine", "train", "ema"} <= set(phases)
    assert result.dataset_records["successor"] == 2
    assert result.train_metrics["steps"] == 2 and result.train_metrics["train_loss"] > 0
    manifest = json.loads((result.checkpoint / "nlac_manifest.json").read_text())
    assert manifest["dataset_hash"] == result.dataset_hash
    # the target is the EMA (tau = 0.5) of the old weights and the new checkpoint
    name = "model.norm.weight"
    with safe_open(embedded_model_dir / "model.safetensors", "pt") as a, \
         safe_open(result.checkpoint / "model.safetensors", "pt") as b, \
         safe_open(result.target / "model.safetensors", "pt") as c:
        expected = 0.5 * a.get_tensor(name).float() + 0.5 * b.get_tensor(name).float()
        assert (c.get_tensor(name).float() - expected).abs().max() < 1e-5
    # the trained checkpoint acts as the next iteration's policy
    new_policy = load(str(result.checkpoint))
    assert new_policy.generate([[{"role": "user", "content": "Is a cat an animal?"}]],
                               SamplingSpec(max_new_tokens=8))[0].text

    # a re-run finds every phase done and writes nothing new
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "it1").glob("*.jsonl")}
    again = run_iteration(tmp_path / "it1", embedded_model_dir, embedded_model_dir, config, load,
                          oracle=embedded_backend)
    assert again.dataset_hash == result.dataset_hash
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "it1").glob("*.jsonl")
            if p.name != "dataset.jsonl"} == {k: v for k, v in before.items() if k != "dataset.jsonl"}
