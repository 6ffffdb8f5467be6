"""Where a training run goes (LaunchConfig): checked settings, the accelerate launch flags, refusals."""

import json

import pytest

from nlac_core.cli import main
from nlac_core.training import LaunchConfig, SFTRunConfig, TrainingError, train
from tests.nlac_core.sft_helpers import records


@pytest.mark.parametrize(("settings", "field"), [
    ({"processes": 0}, "processes"), ({"processes": True}, "processes"), ({"strategy": "zero"}, "strategy"),
    ({"machines": 2, "main_process_port": 29500}, "main_process_ip"),
    ({"machines": 2, "main_process_ip": "10.0.0.1"}, "main_process_port"),
    ({"machines": 2, "machine_rank": 2, "main_process_ip": "h", "main_process_port": 1}, "machine_rank"),
    ({"main_process_port": 70000}, "main_process_port"),
])
def test_it_refuses_launch_settings_naming_the_field(settings, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        LaunchConfig(**settings)


def test_it_spawns_only_for_several_processes_or_a_sharding_strategy():
    assert not LaunchConfig().spawns
    assert LaunchConfig(processes=2).spawns and LaunchConfig(strategy="fsdp").spawns
    two_hosts = LaunchConfig(processes=4, machines=2, machine_rank=1, main_process_ip="10.0.0.1",
                             main_process_port=29500)
    assert two_hosts.world_size == 8 and not two_hosts.main


def _flags(args: list[str]) -> dict[str, str | bool]:
    out, i = {}, 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[args[i]], i = args[i + 1], i + 2
        else:
            out[args[i]], i = True, i + 1
    return out


def test_it_builds_the_accelerate_launch_flags_for_each_strategy():
    ddp = _flags(LaunchConfig(processes=2).accelerate_args(port=29511))
    assert ddp["--num_processes"] == "2" and ddp["--multi_gpu"] is True and ddp["--main_process_port"] == "29511"
    assert ddp["--mixed_precision"] == "no" and "--use_fsdp" not in ddp and "--main_process_ip" not in ddp
    fsdp = _flags(LaunchConfig(processes=4, strategy="fsdp").accelerate_args(port=1))
    assert fsdp["--use_fsdp"] is True and fsdp["--fsdp_version"] == "2"
    assert fsdp["--fsdp_state_dict_type"] == "FULL_STATE_DICT" and "--multi_gpu" not in fsdp
    zero3 = _flags(LaunchConfig(processes=4, strategy="deepspeed").accelerate_args(port=1))
    assert zero3["--use_deepspeed"] is True and zero3["--zero_stage"] == "3"
    assert zero3["--zero3_save_16bit_model"] == "true"
    hosts = _flags(LaunchConfig(processes=8, machines=2, machine_rank=1, main_process_ip="10.0.0.1",
                                main_process_port=29500).accelerate_args(port=29500))
    assert hosts["--num_processes"] == "16" and hosts["--num_machines"] == "2" and hosts["--machine_rank"] == "1"
    assert hosts["--main_process_ip"] == "10.0.0.1"


@pytest.mark.parametrize("strategy", ["fsdp", "deepspeed"])
def test_it_refuses_to_shard_over_gpus_this_host_does_not_have(tmp_path, embedded_model_dir, strategy):
    """Accelerate's multi-CPU mode would quietly run DDP: a sharding strategy without CUDA is an error."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    with pytest.raises(TrainingError, match=f"strategy {strategy}: .*GPUs only"):
        train(records(), embedded_model_dir, tmp_path, SFTRunConfig(max_steps=1), LaunchConfig(processes=2,
                                                                                                strategy=strategy))
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_it_names_the_bad_flag_on_the_command_line(tmp_path, capsys):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records()))
    assert main(["train", str(data), "--out", str(tmp_path / "out"), "--processes", "0"]) == 2
    assert "--processes: must be an integer from 1 to 64" in capsys.readouterr().err
    assert main(["train", str(data), "--out", str(tmp_path / "out"), "--machines", "2"]) == 2
    assert "--main-process-ip: a run on several machines" in capsys.readouterr().err
