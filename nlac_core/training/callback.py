"""The TrainerCallback that turns the Trainer's loop into progress events and honours a stop request.

Imported only inside :func:`nlac_core.training.sft.train_sft`: it pulls in transformers.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from transformers import TrainerCallback

from nlac_core.training.events import ProgressEvent


class ProgressAndStop(TrainerCallback):
    """Reports (step, loss, tokens/s) at every logging step; stops when ``should_stop()`` says so.

    ``should_stop`` is asked after every optimizer step and every accumulation
    micro-step, so a cancelled job or a worker shutting down waits at most one
    forward/backward. Stopping also asks the Trainer to save its state at that
    step, so the run can resume from exactly there.

    At the last step it cancels the Trainer's own final save unless
    ``keep_final_state``: a finished run publishes its model and drops the
    trainer state, so writing optimizer moments (twice the model) is wasted.

    Tokens are the non-padding input tokens the Trainer counts
    (``include_num_input_tokens_seen="non_padding"``); tokens/s counts this
    session only, so a resumed run reports its own speed.
    """

    def __init__(self, on_progress: Callable[[ProgressEvent], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, keep_final_state: bool = False) -> None:
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.keep_final_state = keep_final_state
        self.stopped_early = False
        self.last_loss: float | None = None
        self.started = 0.0
        self.tokens_at_start = 0
        self.step_at_start = 0

    def session_tokens(self, state) -> int:
        return int(state.num_input_tokens_seen) - self.tokens_at_start

    def tokens_per_s(self, state) -> float:
        elapsed = time.perf_counter() - self.started
        return self.session_tokens(state) / elapsed if elapsed > 0 else 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()
        self.tokens_at_start = int(state.num_input_tokens_seen)
        self.step_at_start = state.global_step

    def _check_stop(self, control) -> None:
        if self.should_stop is not None and not self.stopped_early and self.should_stop():
            self.stopped_early = True
            control.should_training_stop = True
            control.should_save = True

    def on_step_end(self, args, state, control, **kwargs):
        self._check_stop(control)
        if state.global_step >= state.max_steps and not self.stopped_early and not self.keep_final_state:
            control.should_save = False

    def on_substep_end(self, args, state, control, **kwargs):
        self._check_stop(control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        self.last_loss = float(logs["loss"])  # in a distributed run: already the mean over all processes
        if self.on_progress is not None and state.is_world_process_zero:
            self.on_progress(ProgressEvent(step=state.global_step, total_steps=state.max_steps, loss=self.last_loss,
                                           tokens_per_s=self.tokens_per_s(state), epoch=float(state.epoch or 0.0),
                                           tokens=int(state.num_input_tokens_seen)))
