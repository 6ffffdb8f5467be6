"""SFT throughput of the embedded model (SmolLM2-135M) on this machine's CPU: full fine-tuning vs LoRA.

    python bench/bench_sft.py [--steps 6] [--batch-size 2] [--max-length 512] [--modes full,lora]

The data are real agent steps of the gpt-4o tau-bench airline run: the prompt is
the conversation before a step as chat messages (the long airline policy clipped
to its start, tool results clipped, the oldest middle messages dropped until the
example fits --max-length tokens), the completion is the agent's step in the
policy's action format. Training goes through ``nlac_core.training.sft.make_trainer``,
the trainer ``train_sft`` uses, minus the final save.

Each mode runs in a child process (a fresh model; its own peak RSS). The first
step (allocating gradients and optimizer state) is reported apart; s/step and
tokens/s are over the steps after it. Tokens are non-padding input tokens
(prompt + completion); "trained" tokens are the completion tokens the loss covers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import ROOT, SHARED

TAU_GPT4O = SHARED / "tau-bench" / "gpt-4o-airline.json"
SYSTEM_CHARS, MESSAGE_CHARS = 600, 700


def examples(tokenizer, max_length: int, limit: int) -> list[dict]:
    """Prompt/completion examples from real steps, each fitted to ``max_length`` tokens by dropping old turns."""
    from nlac_core.actions import render_message_action
    from nlac_core.formats import read

    def chat(message) -> dict:
        text = render_message_action(message) if message.role == "assistant" else (message.content or "").strip()
        limit_chars = SYSTEM_CHARS if message.role == "system" else MESSAGE_CHARS
        return {"role": message.role, "content": text[:limit_chars]}

    def length(prompt, completion) -> int:
        return len(tokenizer.apply_chat_template(prompt + completion, tokenize=True, return_dict=True)["input_ids"])

    out = []
    for item in read(TAU_GPT4O):
        trajectory = getattr(item, "record", None)
        if not hasattr(trajectory, "steps"):
            continue
        for index, step in trajectory.steps:
            history = [chat(m) for m in trajectory.messages[:index]]
            completion = [{"role": "assistant", "content": render_message_action(step)}]
            head, middle = history[:2], history[2:]
            while middle and length(head + middle, completion) > max_length:
                middle = middle[1:]
            if not completion[0]["content"] or length(head + middle, completion) > max_length:
                continue
            out.append({"prompt": head + middle, "completion": completion})
            if len(out) >= limit:
                return out
    return out


def child(mode: str, steps: int, batch: int, max_length: int) -> None:
    """One mode, in this process: prints one JSON line of figures."""
    import torch
    from transformers import AutoTokenizer, TrainerCallback

    from nlac_core.backends.embedded import ensure_embedded_model
    from nlac_core.training import SFTRunConfig
    from nlac_core.training.sft import make_trainer

    model_dir = ensure_embedded_model()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    data = examples(tokenizer, max_length, steps * batch)
    config = SFTRunConfig(max_steps=steps, per_device_batch_size=batch, max_length=max_length, learning_rate=1e-5,
                          lora=mode == "lora", save_steps=10_000, logging_steps=steps)

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.tokens: list[int] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.started, self.seen = time.perf_counter(), state.num_input_tokens_seen

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self.started)
            self.tokens.append(state.num_input_tokens_seen - self.seen)

    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = make_trainer(data, model_dir, Path(tmp) / "state", config)
        clock = Clock()
        trainer.add_callback(clock)
        trained = sum(sum(label != -100 for label in row) for row in trainer.train_dataset["labels"])
        total = sum(len(row) for row in trainer.train_dataset["input_ids"])
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        trainer.train()
    rest_t, rest_tok = clock.times[1:], clock.tokens[1:]
    tokens_per_s = sum(rest_tok) / sum(rest_t)
    print(json.dumps({
        "mode": mode, "steps": len(clock.times), "batch": batch, "max_length": max_length, "examples": len(data),
        "mean_tokens": total / len(data), "trained_share": trained / total, "trainable": trainable,
        "first_step_s": clock.times[0], "s_per_step": statistics.median(rest_t),
        "tokens_per_s": tokens_per_s, "trained_tokens_per_s": tokens_per_s * trained / total,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "threads": torch.get_num_threads()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--modes", default="full,lora")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.batch_size, args.max_length)
        return
    if not TAU_GPT4O.is_file():
        sys.exit(f"{TAU_GPT4O}: missing (set NLAC_SHARED_DATA to the shared data folder)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRANSFORMERS_VERBOSITY": "error",
           "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    print(f"SFT of SmolLM2-135M-Instruct on CPU, real tau-bench airline steps; load average before: "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for mode in args.modes.split(","):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--steps", str(args.steps), "--batch-size",
                              str(args.batch_size), "--max-length", str(args.max_length)],
                             capture_output=True, text=True, env=env, cwd=ROOT)
        if out.returncode != 0:
            sys.exit(f"{mode}: failed\n{out.stderr[-3000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{mode:>4}: {r['steps']} steps of batch {r['batch']}, max_length {r['max_length']} "
              f"({r['mean_tokens']:.0f} tokens/example, {r['trained_share']:.0%} trained), "
              f"{r['trainable'] / 1e6:.1f}M trainable params, {r['threads']} torch threads")
        print(f"      first step {r['first_step_s']:.1f} s, then {r['s_per_step']:.2f} s/step, "
              f"{r['tokens_per_s']:.0f} tokens/s ({r['trained_tokens_per_s']:.0f} trained tokens/s), "
              f"peak RSS {r['rss_mb']:.0f} MB, {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
