"""What a training run reports while it runs and when it ends (plain dataclasses, no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlac_core.checkpoints import Manifest


@dataclass(frozen=True)
class ProgressEvent:
    """One logging step: ``loss`` is the mean over the steps since the previous event.

    ``tokens`` counts the non-padding input tokens seen by the whole run (a
    resumed run included); ``tokens_per_s`` is this session's throughput.
    """

    step: int
    total_steps: int
    loss: float | None
    tokens_per_s: float
    epoch: float
    tokens: int = 0


@dataclass(frozen=True)
class TrainResult:
    """The saved checkpoint, its metrics and its manifest.

    ``metrics``: train_loss (mean over this session's steps: a resumed run's
    own), last_loss, steps, total_steps, tokens (the whole run's), tokens_per_s
    and runtime_s (this session's), stopped_early, resumed_from_step, examples,
    dropped_examples, truncated_examples (see ``sft._fit_report``).
    """

    checkpoint_dir: Path
    metrics: dict[str, Any] = field(default_factory=dict)
    manifest: Manifest | None = None
