"""Supervised fine-tuning with TRL's SFTTrainer: the one training step of NLAC.

Both halves of the algorithm are SFT: the successor model (critic) is trained
on language Bellman targets, the policy on refined actions. The records are
conversational prompt/completion pairs, and TRL computes the loss on the
completion tokens only (``completion_only_loss``), so the model learns to write
the target, never to echo the prompt.

Layout of ``output_dir``::

    config.json, model.safetensors, tokenizer files   the checkpoint (a normal HF model directory)
    nlac_manifest.json                                 written last: its presence marks the checkpoint complete
    adapter/                                           the LoRA adapter (LoRA runs only; the model is merged)
    trainer-state/checkpoint-N/                        the Trainer's resumable state (optimizer, RNG, step)
    trainer-state/nlac_run.json                        what run that state belongs to (dataset hash, config)

A run that stops early (``should_stop``) saves both the checkpoint (flagged
``stopped_early``) and the trainer state; calling again with ``resume=True``
continues from that step. A run that completed keeps no trainer state (it is
two to three times the model's size) unless ``keep_trainer_state``; calling it
again with the same inputs returns the finished checkpoint without training.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub.constants

from nlac_core.checkpoints import (
    MANIFEST_NAME,
    SAFETENSORS_INDEX,
    CheckpointError,
    Manifest,
    check_model_dir,
    dataset_hash,
    read_manifest,
    weight_files,
    write_manifest,
)
from nlac_core.training.config import SFTRunConfig
from nlac_core.training.data import DatasetError, build_dataset, read_records, to_examples
from nlac_core.training.events import ProgressEvent, TrainResult

log = logging.getLogger(__name__)

TRAINER_STATE = "trainer-state"
RUN_FILE = "nlac_run.json"
ADAPTER_DIR = "adapter"


class ResumeError(ValueError):
    """The output directory holds the checkpoint or trainer state of a different run."""


def train_sft(records: Iterable[dict[str, Any]] | str | Path, base_model: str | Path, output_dir: str | Path,
              config: SFTRunConfig | None = None, parent_checkpoint: str | None = None, name: str | None = None,
              on_progress: Callable[[ProgressEvent], None] | None = None,
              should_stop: Callable[[], bool] | None = None, resume: bool = True,
              kind: str = "policy+critic") -> TrainResult:
    """Fine-tune ``base_model`` on prompt/completion records (a list, or a JSONL path) into ``output_dir``.

    ``parent_checkpoint`` names what this checkpoint descends from in the
    lineage (default: the ``base_model`` directory). ``kind`` goes into the
    manifest ("policy+critic" when one model plays every role, as in NLAC).
    This runs in the calling process; :func:`nlac_core.training.distributed.train` runs the same three
    parts (:func:`plan_run`, :func:`fit`, :func:`finish`) with the fit under ``accelerate launch``.
    """
    config = config or SFTRunConfig()
    plan = plan_run(records, base_model, output_dir, config, parent_checkpoint, name, resume, kind)
    if isinstance(plan, TrainResult):
        return plan
    return finish(plan, config, fit(plan, config, on_progress, should_stop))


@dataclass(frozen=True)
class RunPlan:
    """What one run trains and where: decided once, before any process loads a model."""

    raw: list[dict[str, Any]]
    examples: list[dict[str, Any]]
    base: Path
    out: Path
    run: dict[str, Any]
    resume_from: str | None
    name: str | None
    kind: str

    @property
    def state_dir(self) -> Path:
        return self.out / TRAINER_STATE


def plan_run(records: Iterable[dict[str, Any]] | str | Path, base_model: str | Path, output_dir: str | Path,
             config: SFTRunConfig, parent_checkpoint: str | None = None, name: str | None = None,
             resume: bool = True, kind: str = "policy+critic", read_only: bool = False) -> RunPlan | TrainResult:
    """Check the inputs and the output directory: the finished checkpoint of this very run (nothing to train),
    or the plan with the trainer state to resume from. ``read_only`` (the other machines of a multi-host run)
    finds the resume point without clearing or writing the state directory: the main machine owns it."""
    if isinstance(records, str | Path):
        raw = read_records(records)
        examples = to_examples(raw, source=Path(records).name)
    else:
        raw = list(records)
        examples = to_examples(raw)
    base = check_model_dir(base_model).resolve()
    out = Path(output_dir).resolve()
    if out == base:
        raise CheckpointError(f"{out}: the output directory is the base model's; train into another directory")
    out.mkdir(parents=True, exist_ok=True)
    run = {"dataset_hash": dataset_hash(raw), "config": config.to_dict(), "base_model": str(base),
           "parent": parent_checkpoint or str(base), "kind": kind}
    if resume and (finished := _finished(out, run)) is not None:
        return finished
    resume_from = _resume_point(out / TRAINER_STATE, run, resume, read_only)
    return RunPlan(raw, examples, base, out, run, resume_from, name, kind)


def fit(plan: RunPlan, config: SFTRunConfig, on_progress: Callable[[ProgressEvent], None] | None = None,
        should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Train and publish the model into ``plan.out``; the run's metrics. In a distributed run every process
    calls this (the Trainer syncs them); only the main process reports progress and writes files."""
    _no_hub_telemetry()
    trainer, callback = make_trainer(plan.examples, plan.base, plan.state_dir, config, on_progress, should_stop)
    fit_counts = _fit_report(trainer, len(plan.examples), config.max_length)
    started = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=plan.resume_from)
    runtime = time.perf_counter() - started

    state = trainer.state
    metrics = {
        "train_loss": float(output.training_loss), "last_loss": callback.last_loss, "steps": state.global_step,
        "total_steps": state.max_steps, "tokens": int(state.num_input_tokens_seen),
        "tokens_per_s": callback.session_tokens(state) / runtime if runtime > 0 else 0.0,
        "runtime_s": runtime, "stopped_early": callback.stopped_early,
        "resumed_from_step": callback.step_at_start if plan.resume_from else None,
        "processes": trainer.args.world_size, **fit_counts,
    }
    _publish(trainer, plan.out, config)
    return metrics


def finish(plan: RunPlan, config: SFTRunConfig, metrics: dict[str, Any]) -> TrainResult:
    """Write the manifest (marking the checkpoint complete) and drop the trainer state of a finished run."""
    manifest = write_manifest(plan.out, Manifest(
        name=plan.name or plan.out.name, base_model=_root_model(plan.base), parent=plan.run["parent"],
        kind=plan.kind, dataset_hash=plan.run["dataset_hash"], config=plan.run["config"], metrics=metrics,
        extra={"num_records": len(plan.raw), "base_model_dir": str(plan.base), "trainer": _trainer_version()}))
    if not metrics["stopped_early"] and not config.keep_trainer_state:
        shutil.rmtree(plan.state_dir, ignore_errors=True)
    return TrainResult(checkpoint_dir=plan.out, metrics=metrics, manifest=manifest)


def make_trainer(examples: list[dict[str, Any]], base: Path, state_dir: Path, config: SFTRunConfig,
                 on_progress: Callable[[ProgressEvent], None] | None = None,
                 should_stop: Callable[[], bool] | None = None):
    """The configured SFTTrainer and its progress callback (separate so tests and the bench can inspect
    TRL's data pipeline and time steps without publishing a checkpoint)."""
    import torch  # lazy (here and below): torch, transformers, TRL and peft take seconds; only training needs them
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, ProgressCallback
    from trl import SFTConfig, SFTTrainer

    from nlac_core.training.callback import ProgressAndStop

    cuda = torch.cuda.is_available()
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    bf16 = config.bf16 if config.bf16 is not None else bool(cuda and torch.cuda.is_bf16_supported())
    tokenizer = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    if not tokenizer.chat_template:
        raise CheckpointError(f"{base}: the tokenizer has no chat template (chat records need one)")
    # Full fine-tuning keeps fp32 master weights (bf16 runs under autocast); LoRA can leave the frozen base in bf16.
    dtype = torch.bfloat16 if config.lora and bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(base), local_files_only=True, dtype=dtype)
    args = SFTConfig(
        output_dir=str(state_dir), learning_rate=config.learning_rate, num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1, per_device_train_batch_size=config.per_device_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps, max_length=config.max_length,
        seed=config.seed, warmup_steps=config.warmup_ratio, weight_decay=config.weight_decay,
        lr_scheduler_type=config.lr_scheduler, max_grad_norm=config.max_grad_norm,
        logging_steps=config.logging_steps, save_strategy="steps", save_steps=config.save_steps,
        save_total_limit=config.save_total_limit, bf16=bf16, fp16=False,
        gradient_checkpointing=config.gradient_checkpointing,
        completion_only_loss=True, assistant_only_loss=False, packing=False,
        include_num_input_tokens_seen="non_padding", logging_nan_inf_filter=False,
        report_to="none", push_to_hub=False, disable_tqdm=True, dataloader_pin_memory=cuda,
        # several processes without CUDA (a CPU run under accelerate launch): Accelerate's multi-CPU mode, which
        # it takes only when told the run is on CPU, over gloo (NCCL needs GPUs)
        use_cpu=not cuda and distributed, ddp_backend="gloo" if not cuda and distributed else None,
    )
    peft_config = None
    if config.lora:
        from peft import LoraConfig

        targets = config.lora_target_modules
        peft_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                                 target_modules=targets if isinstance(targets, str) else list(targets),
                                 task_type="CAUSAL_LM")
    callback = ProgressAndStop(on_progress, should_stop, keep_final_state=config.keep_trainer_state)
    trainer = SFTTrainer(model=model, args=args, train_dataset=build_dataset(examples), processing_class=tokenizer,
                         peft_config=peft_config, callbacks=[callback])
    # The Trainer's own printers write log dicts to stdout; progress goes through our callback only.
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer, callback


def _fit_report(trainer, n_examples: int, max_length: int) -> dict[str, int]:
    """How many examples TRL kept whole, cut, or dropped at ``max_length``.

    TRL truncates at the end (``keep_start``), so a cut example loses the end of its completion and an example
    whose prompt alone fills ``max_length`` is dropped. Both are silent in TRL; here they are counted into the
    metrics, logged, and a dataset that nothing survives is an error naming the setting.
    """
    lengths = [len(ids) for ids in trainer.train_dataset["input_ids"]]
    fit = {"examples": len(lengths), "dropped_examples": n_examples - len(lengths),
           "truncated_examples": sum(n >= max_length for n in lengths)}
    if not lengths:
        raise DatasetError(f"every record's prompt is at least max_length={max_length} tokens: nothing of the "
                           "completions would be trained; raise max_length or shorten the prompts")
    if fit["dropped_examples"] or fit["truncated_examples"]:
        log.warning("max_length=%d: %d of %d examples dropped (prompt too long), %d cut before the end of their "
                    "completion", max_length, fit["dropped_examples"], n_examples, fit["truncated_examples"])
    return fit


def _publish(trainer, out: Path, config: SFTRunConfig) -> None:
    """Write the checkpoint into ``out``: files saved to a temporary folder, then moved in, the manifest last.

    The old manifest goes first, so a crash half-way leaves a directory marked unfinished, never a
    mixture that claims to be complete. A LoRA model is merged into a plain model; its adapter is kept.

    In a distributed run every process comes here: under DDP each holds the whole model and the main
    process saves it; under FSDP or DeepSpeed ZeRO-3 the weights are sharded, so all processes take part
    in ``trainer.save_model`` (it gathers the full state dict) and the main process merges and moves.
    """
    sharded = bool(getattr(trainer, "is_fsdp_enabled", False) or getattr(trainer, "is_deepspeed_enabled", False))
    main = trainer.is_world_process_zero()
    gathered = out / ".checkpoint-gathered"
    if sharded:
        trainer.save_model(str(gathered))
    if main:
        _publish_here(trainer, out, config, gathered if sharded else None)
    trainer.accelerator.wait_for_everyone()


def _publish_here(trainer, out: Path, config: SFTRunConfig, gathered: Path | None) -> None:
    model, tokenizer = trainer.model, trainer.processing_class
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    if gathered is not None:  # the full weights, written by save_model from the shards: reload them whole
        model = _reload_gathered(gathered, config)
    if config.lora:
        adapter = out / ADAPTER_DIR
        shutil.rmtree(adapter, ignore_errors=True)
        model.save_pretrained(str(adapter))
        model = model.merge_and_unload()
    model.config.use_cache = True
    tmp = Path(tempfile.mkdtemp(prefix=".checkpoint-", dir=out))
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        for stale in [*weight_files(out), out / SAFETENSORS_INDEX]:
            stale.unlink(missing_ok=True)
        for file in tmp.iterdir():
            os.chmod(file, 0o644)
            os.replace(file, out / file.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if gathered is not None:
            shutil.rmtree(gathered, ignore_errors=True)


def _reload_gathered(gathered: Path, config: SFTRunConfig):
    """The model saved by ``trainer.save_model`` under FSDP/ZeRO-3, loaded on CPU (a LoRA run saved its adapter
    only: it is put back on the base model it was trained from)."""
    from transformers import AutoModelForCausalLM

    if not config.lora:
        return AutoModelForCausalLM.from_pretrained(str(gathered), local_files_only=True)
    from peft import AutoPeftModelForCausalLM

    return AutoPeftModelForCausalLM.from_pretrained(str(gathered), local_files_only=True, is_trainable=False)


def _finished(out: Path, run: dict[str, Any]) -> TrainResult | None:
    """The finished checkpoint of this very run (same data, config, base, parent), if ``out`` holds one.

    A checkpoint of another run is never trained over silently: that is a ResumeError (``resume=False``
    overwrites). A checkpoint of this run that stopped early is resumed.
    """
    if not (out / MANIFEST_NAME).is_file():
        return None
    manifest = read_manifest(out)
    mine = {"dataset_hash": manifest.dataset_hash, "config": manifest.config, "parent": manifest.parent,
            "kind": manifest.kind, "base_model": manifest.extra.get("base_model_dir")}
    differ = [key for key in run if mine[key] != run[key]]
    if differ:
        raise ResumeError(f"{out}: holds a checkpoint of another run (different {', '.join(differ)}); pass "
                          "resume=False to overwrite it, or train into another directory")
    if manifest.metrics.get("stopped_early") is False:
        return TrainResult(checkpoint_dir=out, metrics=manifest.metrics, manifest=manifest)
    return None


def _resume_point(state_dir: Path, run: dict[str, Any], resume: bool, read_only: bool = False) -> str | None:
    """The Trainer checkpoint to resume from, after checking it belongs to this run; None to start afresh
    (which clears the state directory and records the run there, unless ``read_only``)."""
    from transformers.trainer_utils import get_last_checkpoint

    run_file = state_dir / RUN_FILE
    if resume and run_file.is_file():
        try:
            previous = json.loads(run_file.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise ResumeError(f"{run_file}: not valid JSON; delete {state_dir} or pass resume=False") from None
        differ = [key for key in run if previous.get(key) != run[key]]
        if differ:
            raise ResumeError(f"{state_dir}: holds the trainer state of another run (different "
                              f"{', '.join(differ)}); pass resume=False to start over, or train into another "
                              "directory")
        last = get_last_checkpoint(str(state_dir))
        if last:
            return last
    if read_only:
        return None
    shutil.rmtree(state_dir, ignore_errors=True)
    state_dir.mkdir(parents=True)
    run_file.write_text(json.dumps(run, indent=2), encoding="utf-8")
    return None


def _root_model(base: Path) -> str:
    """The lineage root: the base directory's own base_model when it is one of our checkpoints."""
    try:
        return read_manifest(base).base_model or str(base)
    except CheckpointError:
        return str(base)


def _trainer_version() -> str:
    import transformers
    import trl

    return f"trl {trl.__version__}, transformers {transformers.__version__}"


def _no_hub_telemetry() -> None:
    """TRL pings the Hub when a trainer starts; models here load from local paths only and must not phone home
    (air-gapped clusters). huggingface_hub reads the switch at import time, so set the constant too."""
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    huggingface_hub.constants.HF_HUB_DISABLE_TELEMETRY = True
