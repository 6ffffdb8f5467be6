"""SFT of the critic and the policy (TRL + peft), with resumable, manifest-carrying checkpoints.

    from nlac_core.training import SFTRunConfig, train_sft
    result = train_sft("targets.jsonl", base_model="var/models/smollm2-135m-instruct", output_dir="ckpt/critic-1",
                       config=SFTRunConfig(max_steps=100, lora=True), on_progress=print)

Importing this package does not import torch, transformers or TRL; ``train_sft`` does, when called.
"""

from nlac_core.training.config import SFTRunConfig
from nlac_core.training.data import DatasetError, read_records, to_examples
from nlac_core.training.events import ProgressEvent, TrainResult
from nlac_core.training.sft import ResumeError, train_sft

__all__ = ["DatasetError", "ProgressEvent", "ResumeError", "SFTRunConfig", "TrainResult", "read_records",
           "to_examples", "train_sft"]
