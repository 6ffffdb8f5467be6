"""train, ema-update, ema-init: SFT checkpoints and the EMA target network from the command line.

Inputs are checked before torch is imported, so a bad file or directory fails
in a fraction of a second with the place of the problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nlac_core.checkpoints import CheckpointError, check_model_dir
from nlac_core.commands.common import UsageError, progress
from nlac_core.ema import ema_update, init_target
from nlac_core.training import (
    STRATEGIES,
    DatasetError,
    LaunchConfig,
    ResumeError,
    SFTRunConfig,
    TrainingError,
    read_records,
    train,
)

# flag dest -> SFTRunConfig field; a flag left unset keeps the --config file's value (or the default)
CONFIG_FLAGS = {
    "lr": "learning_rate", "epochs": "epochs", "max_steps": "max_steps", "batch_size": "per_device_batch_size",
    "grad_accum": "gradient_accumulation_steps", "max_length": "max_length", "lora": "lora", "lora_r": "lora_r",
    "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout", "seed": "seed", "warmup_ratio": "warmup_ratio",
    "weight_decay": "weight_decay", "save_steps": "save_steps", "keep_trainer_state": "keep_trainer_state",
    "gradient_checkpointing": "gradient_checkpointing", "bf16": "bf16",
}


def config_from_args(args):
    data: dict = {}
    if args.config:
        path = Path(args.config)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(f"--config {path}: no such file") from None
        except json.JSONDecodeError as exc:
            raise UsageError(f"--config {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise UsageError(f"--config {path}: expected a JSON object of SFTRunConfig fields")
    for flag, name in CONFIG_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            data[name] = value
    try:
        return SFTRunConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def launch_from_args(args) -> LaunchConfig:
    try:
        return LaunchConfig(processes=args.processes, strategy=args.strategy, machines=args.machines,
                            machine_rank=args.machine_rank, main_process_ip=args.main_process_ip,
                            main_process_port=args.main_process_port)
    except ValueError as exc:
        raise UsageError(f"--{str(exc).replace('_', '-')}") from None


def cmd_train(args) -> int:
    try:
        records = read_records(args.dataset)
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    config = config_from_args(args)
    launch = launch_from_args(args)
    base = _model_dir(args.base_model, "--base-model")
    _quiet_libraries()
    reporter = _Reporter()
    try:
        result = train(records, base, args.out, config, launch, parent_checkpoint=args.parent, name=args.name,
                       on_progress=reporter, resume=args.resume, kind=args.kind)
    except (ResumeError, CheckpointError, DatasetError) as exc:  # DatasetError: e.g. every record too long
        raise UsageError(str(exc)) from None
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        reporter.close()
    metrics = result.metrics
    if not launch.main:
        print(f"machine {launch.machine_rank} done: machine 0 writes the checkpoint {result.checkpoint_dir}")
        return 0
    print(f"checkpoint: {result.checkpoint_dir}")
    if metrics.get("stopped_early"):
        print("stopped early: resume with the same command")
    print(f"steps: {metrics['steps']}/{metrics['total_steps']}  train_loss: {metrics['train_loss']:.4f}  "
          f"last_loss: {_num(metrics.get('last_loss'))}  tokens: {metrics['tokens']}  "
          f"tokens/s: {metrics['tokens_per_s']:.1f}  runtime: {metrics['runtime_s']:.1f} s")
    return 0


def cmd_ema_update(args) -> int:
    target = _model_dir(args.target, "--target", need_tokenizer=False)
    online = _model_dir(args.online, "--online", need_tokenizer=False)
    try:
        out = ema_update(target, online, args.tau, out_dir=args.out)
    except (CheckpointError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(f"ema target: {out} (tau {args.tau:g})")
    return 0


def cmd_ema_init(args) -> int:
    online = _model_dir(args.online, "--online", need_tokenizer=False)
    try:
        out = init_target(online, args.target)
    except CheckpointError as exc:
        raise UsageError(str(exc)) from None
    print(f"ema target: {out} (a copy of {online})")
    return 0


class _Reporter:
    """A tqdm bar on a terminal (or with NLAC_PROGRESS set); plain lines on stderr otherwise."""

    def __init__(self) -> None:
        self.bar = None

    def __call__(self, event) -> None:
        if self.bar is None:
            self.bar = progress(total=event.total_steps, desc="train")
        if self.bar.disable:
            print(f"step {event.step}/{event.total_steps}  loss {_num(event.loss)}  "
                  f"{event.tokens_per_s:.0f} tok/s  epoch {event.epoch:.2f}", file=sys.stderr, flush=True)
            return
        self.bar.n = event.step
        self.bar.set_postfix(loss=_num(event.loss), tok_s=f"{event.tokens_per_s:.0f}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _model_dir(path: str | None, flag: str, need_tokenizer: bool = True) -> Path:
    if path is None:
        from nlac_core.backends.embedded import ensure_embedded_model  # lazy: transformers

        return ensure_embedded_model()
    try:
        return check_model_dir(path, need_tokenizer=need_tokenizer)
    except CheckpointError as exc:
        raise UsageError(f"{flag} {exc}") from None


def _quiet_libraries() -> None:
    """datasets and transformers draw their own bars (tokenizing, loading, saving); ours is the one to read."""
    import datasets  # lazy: datasets and transformers only for a training run
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def _num(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def add_launch_args(p) -> None:
    """--processes, --strategy and the multi-host flags (train, iterate): read by launch_from_args."""
    launch = p.add_argument_group("processes, GPUs and hosts (accelerate launch; see deploy/README.md)")
    launch.add_argument("--processes", type=int, default=1,
                        help="training processes on this machine, one per GPU (default 1: in this process)")
    launch.add_argument("--strategy", default="ddp", choices=STRATEGIES,
                        help="ddp: a whole model per process (default); fsdp or deepspeed (ZeRO-3): the model "
                             "sharded over the GPUs, for one that does not fit one GPU")
    launch.add_argument("--machines", type=int, default=1, help="hosts taking part (each runs this command)")
    launch.add_argument("--machine-rank", type=int, default=0, help="this host's rank, 0 on the main host")
    launch.add_argument("--main-process-ip", default=None, help="the main host's address (several machines)")
    launch.add_argument("--main-process-port", type=int, default=None,
                        help="the main host's port (several machines; default on one: a free port)")


def register(sub) -> None:
    p = sub.add_parser("train", help="SFT a model on prompt/completion JSONL (critic targets or refined actions)",
                       description="Fine-tune a local model on a JSONL file of {prompt, completion} chat records. "
                                   "Settings: --config JSON (SFTRunConfig fields), then the flags below override.")
    p.add_argument("dataset", help="JSONL of records with 'prompt' and 'completion' chat messages")
    p.add_argument("--out", required=True, help="checkpoint directory to write (and resume from)")
    p.add_argument("--base-model", default=None, help="local model directory to start from (default: embedded)")
    p.add_argument("--config", default=None, help="JSON file of SFTRunConfig fields")
    p.add_argument("--lr", type=float, default=None, help="learning rate")
    p.add_argument("--epochs", type=float, default=None)
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides --epochs)")
    p.add_argument("--batch-size", type=int, default=None, help="per-device batch size")
    p.add_argument("--grad-accum", type=int, default=None, help="gradient accumulation steps")
    p.add_argument("--max-length", type=int, default=None, help="tokens per sequence (longer ones are cut)")
    p.add_argument("--lora", action=argparse.BooleanOptionalAction, default=None,
                   help="train LoRA adapters and merge them into the saved model")
    p.add_argument("--lora-r", type=int, default=None)
    p.add_argument("--lora-alpha", type=int, default=None)
    p.add_argument("--lora-dropout", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--warmup-ratio", type=float, default=None)
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--save-steps", type=int, default=None, help="save resumable trainer state every N steps")
    p.add_argument("--keep-trainer-state", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                   help="bf16 mixed precision (default: on when a CUDA GPU supports it)")
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="continue from the trainer state in --out (default) or start over")
    p.add_argument("--name", default=None, help="checkpoint name in the manifest (default: the --out folder name)")
    p.add_argument("--parent", default=None, help="lineage parent in the manifest (default: the base model)")
    p.add_argument("--kind", default="policy+critic", choices=("policy+critic", "critic", "policy"))
    add_launch_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("ema-update", help="target <- (1 - tau) * target + tau * online (the NLAC target network)")
    p.add_argument("--target", required=True, help="the current target checkpoint")
    p.add_argument("--online", required=True, help="the checkpoint just trained")
    p.add_argument("--tau", type=float, required=True, help="weight of the online model, in [0, 1] (e.g. 0.05)")
    p.add_argument("--out", default=None, help="write here instead of replacing --target")
    p.set_defaults(func=cmd_ema_update)

    p = sub.add_parser("ema-init", help="start a target network as a copy of a checkpoint")
    p.add_argument("--online", required=True, help="the checkpoint to copy")
    p.add_argument("--target", required=True, help="the target directory to create (or replace)")
    p.set_defaults(func=cmd_ema_init)
