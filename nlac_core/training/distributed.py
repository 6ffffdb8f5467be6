"""SFT on several processes, GPUs or hosts: the fit runs under ``accelerate launch`` as a child process tree.

One process per GPU; the strategy decides how the model is spread over them:

- ``ddp`` (default): every process holds the whole model and a share of each batch (DistributedDataParallel).
- ``fsdp``: parameters, gradients and optimizer state are sharded over the processes (PyTorch FSDP2), for a
  model that does not fit one GPU.
- ``deepspeed``: the same with DeepSpeed ZeRO stage 3 (needs ``pip install deepspeed`` on the GPU hosts).

The process calling :func:`train` (the CLI, or a Celery worker) plans the run (:func:`sft.plan_run`: the
finished checkpoint, or the trainer state to resume from), writes the request and the records into
``OUT/.launch/machine-R/``, starts ``accelerate launch -m nlac_core.training.rank`` in a new session, and
then watches it: the main rank appends progress events to ``events.jsonl`` (passed on to ``on_progress``),
a stop request (``should_stop``) becomes a ``stop`` file that every rank agrees on at the same step (an
all-reduce, so no rank leaves a collective half-way), the ranks save their state and exit, and the
caller writes the manifest from the main rank's ``result.json``. Whatever happens to the caller (a stop
that outlasts ``stop_grace_s``, an exception, a soft time limit), the whole process tree is terminated
before :func:`train` returns: torchrun starts its ranks in sessions of their own, so the tree is walked,
not a process group. A rank whose caller died (a worker SIGKILLed) stops by itself.

Several hosts: every host runs the same command with its ``machine_rank`` and the main host's address; the
output directory and the records must be on storage all hosts share (see ``deploy/README.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlac_core.training.config import SFTRunConfig
from nlac_core.training.events import ProgressEvent, TrainResult
from nlac_core.training.sft import RunPlan, finish, plan_run, train_sft

STRATEGIES = ("ddp", "fsdp", "deepspeed")
LAUNCH_DIR = ".launch"
PARENT_PID_ENV = "NLAC_TRAIN_PARENT_PID"


class TrainingError(RuntimeError):
    """The launched training processes failed; the message ends with the last lines of their log."""


@dataclass(frozen=True)
class LaunchConfig:
    """Where the fit runs. ``processes`` is per machine (one per GPU); ``machines`` > 1 needs the main
    machine's address on every machine, and each machine its own ``machine_rank``."""

    processes: int = 1
    strategy: str = "ddp"
    machines: int = 1
    machine_rank: int = 0
    main_process_ip: str | None = None
    main_process_port: int | None = None  # None: a free port on this host (one machine only)

    def __post_init__(self) -> None:
        if not isinstance(self.processes, int) or isinstance(self.processes, bool) or not 1 <= self.processes <= 64:
            raise ValueError(f"processes: must be an integer from 1 to 64, got {self.processes!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy: must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if not isinstance(self.machines, int) or not 1 <= self.machines <= 1024:
            raise ValueError(f"machines: must be an integer from 1 to 1024, got {self.machines!r}")
        if not isinstance(self.machine_rank, int) or not 0 <= self.machine_rank < self.machines:
            raise ValueError(f"machine_rank: must be from 0 to machines - 1 = {self.machines - 1}, "
                             f"got {self.machine_rank!r}")
        if self.machines > 1 and not self.main_process_ip:
            raise ValueError("main_process_ip: a run on several machines needs the main machine's address")
        if self.machines > 1 and not self.main_process_port:
            raise ValueError("main_process_port: a run on several machines needs a port every machine agrees on")
        if self.main_process_port is not None and not 1 <= self.main_process_port <= 65535:
            raise ValueError(f"main_process_port: must be from 1 to 65535, got {self.main_process_port!r}")

    @property
    def world_size(self) -> int:
        return self.processes * self.machines

    @property
    def spawns(self) -> bool:
        """False for the plain case (one process, DDP): the fit runs in the caller's process."""
        return self.world_size > 1 or self.strategy != "ddp"

    @property
    def main(self) -> bool:
        return self.machine_rank == 0

    def accelerate_args(self, port: int) -> list[str]:
        """The ``accelerate launch`` flags (the Trainer sets mixed precision itself, from the run's bf16)."""
        args = ["--num_processes", str(self.world_size), "--num_machines", str(self.machines),
                "--machine_rank", str(self.machine_rank), "--main_process_port", str(port),
                "--mixed_precision", "no", "--dynamo_backend", "no", "--max_restarts", "0"]
        if self.machines > 1:
            args += ["--main_process_ip", str(self.main_process_ip)]
        if self.strategy == "ddp":
            return args + (["--multi_gpu"] if self.world_size > 1 else [])
        if self.strategy == "fsdp":
            return args + ["--use_fsdp", "--fsdp_version", "2", "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
                           "--fsdp_state_dict_type", "FULL_STATE_DICT", "--fsdp_reshard_after_forward", "true",
                           "--fsdp_cpu_ram_efficient_loading", "true"]
        return args + ["--use_deepspeed", "--zero_stage", "3", "--zero3_init_flag", "true",
                       "--zero3_save_16bit_model", "true", "--offload_optimizer_device", "none",
                       "--offload_param_device", "none"]


def train(records: Iterable[dict[str, Any]] | str | Path, base_model: str | Path, output_dir: str | Path,
          config: SFTRunConfig | None = None, launch: LaunchConfig | None = None, *,
          parent_checkpoint: str | None = None, name: str | None = None,
          on_progress: Callable[[ProgressEvent], None] | None = None, should_stop: Callable[[], bool] | None = None,
          resume: bool = True, kind: str = "policy+critic", stop_grace_s: float = 600.0,
          poll_s: float = 0.5) -> TrainResult:
    """:func:`sft.train_sft`, on the processes ``launch`` names (in this process when it names one).

    ``stop_grace_s``: how long the ranks may take, once asked to stop, to save their state and exit before
    they are killed (a retry then resumes from the last periodic save instead)."""
    config = config or SFTRunConfig()
    launch = launch or LaunchConfig()
    if not launch.spawns:
        return train_sft(records, base_model, output_dir, config, parent_checkpoint=parent_checkpoint, name=name,
                         on_progress=on_progress, should_stop=should_stop, resume=resume, kind=kind)
    if launch.strategy != "ddp":
        _need_gpus(launch.strategy)
    plan = plan_run(records, base_model, output_dir, config, parent_checkpoint, name, resume, kind,
                    read_only=not launch.main)
    if isinstance(plan, TrainResult):
        return plan
    files = _LaunchFiles(plan.out / LAUNCH_DIR / f"machine-{launch.machine_rank}")
    files.write_request(plan, config)
    port = launch.main_process_port or _free_port()
    command = [sys.executable, "-m", "accelerate.commands.launch", *launch.accelerate_args(port),
               "-m", "nlac_core.training.rank", str(files.request)]
    rc = _watch(command, files, on_progress, should_stop, stop_grace_s, poll_s)
    if rc != 0:
        raise TrainingError(f"accelerate launch ({launch.world_size} processes, {launch.strategy}) exited with "
                            f"{rc}; the last lines of {files.log}:\n{files.log_tail()}")
    if not launch.main:  # the main machine publishes and writes the manifest
        return TrainResult(checkpoint_dir=plan.out, metrics={"machine_rank": launch.machine_rank})
    metrics = files.result()
    result = finish(plan, config, metrics)
    if not metrics["stopped_early"]:
        files.remove()
    return result


def _watch(command: list[str], files: _LaunchFiles, on_progress, should_stop, stop_grace_s: float,
           poll_s: float) -> int:
    """Run the launcher, pass its events on, turn a stop request into the stop file; kill the tree at the end."""
    # the ranks import nlac_core as this process does, wherever it was found (a checkout on sys.path, say)
    here = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, PARENT_PID_ENV: str(os.getpid()), "PYTHONUNBUFFERED": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": path}
    with files.log.open("ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    tree = ProcessTree(proc.pid)
    stop_asked_at = None
    try:
        while proc.poll() is None:
            tree.refresh()
            files.pass_events(on_progress)
            if stop_asked_at is None and should_stop is not None and should_stop():
                files.stop.touch()
                stop_asked_at = time.monotonic()
            if stop_asked_at is not None and time.monotonic() - stop_asked_at > stop_grace_s:
                tree.kill()
                proc.wait()
                raise TrainingError(f"the training processes did not stop within {stop_grace_s:.0f} s of the stop "
                                    "request and were killed; a retry resumes from their last periodic save")
            time.sleep(poll_s)
        files.pass_events(on_progress)
        return proc.returncode
    finally:
        tree.kill()


class ProcessTree:
    """A process and every descendant seen so far: kept while they run, because the ranks are re-parented
    to init (out of reach of a walk from the launcher) once the launcher exits."""

    def __init__(self, pid: int) -> None:
        import psutil  # lazy: only a distributed run watches processes

        self._psutil = psutil
        self.procs: dict[int, Any] = {}
        with contextlib.suppress(psutil.NoSuchProcess):
            self.procs[pid] = psutil.Process(pid)
        self.refresh()

    def refresh(self) -> None:
        for proc in list(self.procs.values()):
            with contextlib.suppress(self._psutil.Error):  # gone meanwhile
                for child in proc.children(recursive=True):
                    self.procs.setdefault(child.pid, child)

    def alive(self) -> list:
        out = []
        for proc in self.procs.values():
            with contextlib.suppress(self._psutil.Error):
                if proc.is_running() and proc.status() != self._psutil.STATUS_ZOMBIE:
                    out.append(proc)
        return out

    def kill(self, grace_s: float = 10.0) -> None:
        """SIGTERM everything (torchrun's agent passes it on; the Trainer dies cleanly), then SIGKILL."""
        self.refresh()
        alive = self.alive()
        for proc in alive:
            _signal(proc, signal.SIGTERM)
        _, still = self._psutil.wait_procs(alive, timeout=grace_s)
        for proc in still:
            _signal(proc, signal.SIGKILL)
        self._psutil.wait_procs(still, timeout=grace_s)


def launched_by(pid: int) -> list:
    """The training processes (launcher, agent, ranks) that process ``pid`` started and that still run: found
    by the environment every one of them inherits, so re-parented ones are found too."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(PARENT_PID_ENV) == str(pid) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def _signal(proc, sig) -> None:
    with contextlib.suppress(Exception):  # gone already (psutil.NoSuchProcess) is the usual case
        proc.send_signal(sig)


class _LaunchFiles:
    """The files one machine's launch shares with its ranks (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.request = folder / "request.json"
        self.records = folder / "records.jsonl"
        self.events = folder / "events.jsonl"
        self.result_file = folder / "result.json"
        self.stop = folder / "stop"
        self.log = folder / "launch.log"
        self._events_read = 0

    def write_request(self, plan: RunPlan, config: SFTRunConfig) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in (self.events, self.result_file, self.stop):
            stale.unlink(missing_ok=True)
        tmp = self.records.with_suffix(".part")
        with tmp.open("w", encoding="utf-8") as handle:
            for record in plan.raw:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        tmp.replace(self.records)
        self.request.write_text(json.dumps({
            "records": str(self.records), "base": str(plan.base), "out": str(plan.out), "run": plan.run,
            "resume_from": plan.resume_from, "name": plan.name, "kind": plan.kind, "config": config.to_dict(),
            "events": str(self.events), "result": str(self.result_file), "stop": str(self.stop),
        }, indent=2), encoding="utf-8")

    def pass_events(self, on_progress) -> None:
        if not self.events.is_file():
            return
        with self.events.open("rb") as handle:
            handle.seek(self._events_read)
            for line in handle:
                if not line.endswith(b"\n"):  # the rank is still writing it
                    break
                self._events_read += len(line)
                if on_progress is not None:
                    on_progress(ProgressEvent(**json.loads(line)))

    def result(self) -> dict[str, Any]:
        try:
            return json.loads(self.result_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TrainingError(f"the training processes exited without writing {self.result_file}; the last "
                                f"lines of {self.log}:\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # another machine's folder is still there
            self.folder.parent.rmdir()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _need_gpus(strategy: str) -> None:
    """FSDP and ZeRO-3 shard over CUDA devices only: Accelerate's multi-CPU mode would quietly run DDP instead."""
    import importlib.util

    import torch  # lazy: the caller of a one-process run never needs it

    if not torch.cuda.is_available():
        raise TrainingError(f"strategy {strategy}: Accelerate shards a model over CUDA GPUs only, and this host "
                            "has none; use strategy ddp here")
    if strategy == "deepspeed" and importlib.util.find_spec("deepspeed") is None:
        raise TrainingError("strategy deepspeed: the deepspeed package is not installed on this host "
                            "(pip install deepspeed on the GPU hosts), or use strategy fsdp")
