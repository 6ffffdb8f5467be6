"""SFT of the critic and the policy (TRL + peft), with resumable, manifest-carrying checkpoints.

    from nlac_core.training import SFTRunConfig, train_sft
    result = train_sft("targets.jsonl", base_model="var/models/smollm2-135m-instruct", output_dir="ckpt/critic-1",
                       config=SFTRunConfig(max_steps=100, lora=True), on_progress=print)

On several processes, GPUs or hosts (``accelerate launch``, DDP / FSDP / DeepSpeed ZeRO-3)::

    from nlac_core.training import LaunchConfig, train
    result = train("targets.jsonl", base, "ckpt/critic-1", SFTRunConfig(max_steps=100),
                   LaunchConfig(processes=4, strategy="fsdp"))

Importing this package does not import torch, transformers or TRL; ``train_sft`` does, when called.
"""

from nlac_core.training.config import SFTRunConfig
from nlac_core.training.data import DatasetError, read_records, to_examples
from nlac_core.training.distributed import STRATEGIES, LaunchConfig, TrainingError, train
from nlac_core.training.events import ProgressEvent, TrainResult
from nlac_core.training.sft import ResumeError, train_sft

__all__ = ["STRATEGIES", "DatasetError", "LaunchConfig", "ProgressEvent", "ResumeError", "SFTRunConfig",
           "TrainResult", "TrainingError", "read_records", "to_examples", "train", "train_sft"]
