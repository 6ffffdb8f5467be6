"""The settings of one SFT run, as a plain dataclass (TRL's SFTConfig is built from it).

Why our own dataclass rather than TRL's: it is what a job stores, shows in the
UI and writes into the checkpoint manifest, so it must be small, JSON-able,
validated with errors that name the field, and independent of TRL's version.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

SCHEDULERS = ("linear", "cosine", "constant", "constant_with_warmup")


@dataclass(frozen=True)
class SFTRunConfig:
    """How to fine-tune. ``max_steps`` (when set) overrides ``epochs``.

    ``bf16=None`` means automatic: on when a CUDA GPU supports it, off on CPU.
    LoRA trains low-rank adapters and merges them into the saved model, so the
    checkpoint loads like any full fine-tune.
    """

    learning_rate: float = 2e-5
    epochs: float = 1.0
    max_steps: int | None = None
    per_device_batch_size: int = 2
    gradient_accumulation_steps: int = 1
    max_length: int = 1024
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: str | tuple[str, ...] = "all-linear"
    seed: int = 0
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    lr_scheduler: str = "linear"
    max_grad_norm: float = 1.0
    logging_steps: int = 1
    save_steps: int = 200
    save_total_limit: int = 1
    bf16: bool | None = None
    gradient_checkpointing: bool = False
    keep_trainer_state: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.lora_target_modules, list):
            object.__setattr__(self, "lora_target_modules", tuple(self.lora_target_modules))
        self._validate()

    def _validate(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"SFTRunConfig.{name}: {why}, got {getattr(self, name)!r}")

        for name in fields(self):
            value = getattr(self, name.name)
            expected = _EXPECTED[name.name]
            if value is None and None in expected:
                continue
            if isinstance(value, bool) and bool not in expected:
                raise bad(name.name, f"must be {_describe(expected)}")
            if not isinstance(value, tuple(t for t in expected if t is not None)):
                raise bad(name.name, f"must be {_describe(expected)}")
        positive = ("learning_rate", "epochs", "per_device_batch_size", "gradient_accumulation_steps", "max_length",
                    "lora_r", "lora_alpha", "logging_steps", "save_steps", "save_total_limit")
        for name in positive:
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise bad(name, "must be a positive number")
        if self.max_steps is not None and self.max_steps < 1:
            raise bad("max_steps", "must be at least 1 (or null to train for `epochs`)")
        if not 0 <= self.lora_dropout < 1:
            raise bad("lora_dropout", "must be in [0, 1)")
        if not 0 <= self.warmup_ratio < 1:
            raise bad("warmup_ratio", "must be in [0, 1)")
        if not (self.weight_decay >= 0 and math.isfinite(self.weight_decay)):
            raise bad("weight_decay", "must be >= 0")
        if not (self.max_grad_norm >= 0 and math.isfinite(self.max_grad_norm)):
            raise bad("max_grad_norm", "must be >= 0 (0 disables clipping)")
        if self.max_length < 16:
            raise bad("max_length", "must be at least 16 tokens")
        if self.lr_scheduler not in SCHEDULERS:
            raise bad("lr_scheduler", f"must be one of {', '.join(SCHEDULERS)}")
        targets = self.lora_target_modules
        if isinstance(targets, str) and not targets or isinstance(targets, tuple) and (
                not targets or not all(isinstance(t, str) and t for t in targets)):
            raise bad("lora_target_modules", "must be 'all-linear' or a non-empty list of module names")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if isinstance(self.lora_target_modules, tuple):
            data["lora_target_modules"] = list(self.lora_target_modules)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SFTRunConfig:
        """Build from JSON; an unknown key is an error naming it (a typo must not silently train with a default)."""
        if not isinstance(data, dict):
            raise ValueError(f"SFTRunConfig: expected a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_EXPECTED))
        if unknown:
            raise ValueError(f"SFTRunConfig: unknown field(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(_EXPECTED)}")
        return cls(**data)

    def replace(self, **changes: Any) -> SFTRunConfig:
        return SFTRunConfig.from_dict({**self.to_dict(), **changes})


_EXPECTED: dict[str, tuple[Any, ...]] = {
    "learning_rate": (float, int), "epochs": (float, int), "max_steps": (int, None),
    "per_device_batch_size": (int,), "gradient_accumulation_steps": (int,), "max_length": (int,),
    "lora": (bool,), "lora_r": (int,), "lora_alpha": (int,), "lora_dropout": (float, int),
    "lora_target_modules": (str, tuple), "seed": (int,), "warmup_ratio": (float, int), "weight_decay": (float, int),
    "lr_scheduler": (str,), "max_grad_norm": (float, int), "logging_steps": (int,), "save_steps": (int,),
    "save_total_limit": (int,), "bf16": (bool, None), "gradient_checkpointing": (bool,),
    "keep_trainer_state": (bool,),
}


def _describe(types: tuple[Any, ...]) -> str:
    names = {float: "a number", int: "an integer", bool: "true or false", str: "a string",
             tuple: "a list of strings", None: "null"}
    out = []
    for t in types:
        if t is int and float in types:
            continue
        out.append(names[t])
    return " or ".join(out)
