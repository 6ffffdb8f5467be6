"""The target network: an exponential moving average of the online weights.

NLAC samples the future text of s_t+1 from a slowly moving copy of the
successor model, M_target, as DQN bootstraps from a target network: after each
training round, target <- (1 - tau) * target + tau * online.

The update works on safetensors files tensor by tensor and writes the output
file by hand (header first, then each tensor's bytes as it is computed), so
memory stays at one tensor of each model whatever the model's size, and no
model class is instantiated. A sharded model (``model.safetensors.index.json``)
is handled shard by shard with the target's layout. The result is written to a
temporary directory and renamed into place, so a crash never leaves a half
averaged target behind.

The schedule (``TargetSchedule``) decides each update's rate: Polyak averaging
with ``tau`` at every update, or a hard copy of the online weights every N
updates (DQN's target network). Each target's manifest keeps its ``mixture``:
the weight of every checkpoint it averages (the base it started from included),
so "how much of the target is still the base model" is read, not guessed: with
tau = 0.05 once per iteration, 0.95^5 = 77% of it after five iterations.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from safetensors import safe_open

from nlac_core.checkpoints import (
    MANIFEST_NAME,
    SAFETENSORS_INDEX,
    CheckpointError,
    Manifest,
    check_model_dir,
    read_manifest,
    read_safetensors_header,
    safetensors_files,
    write_manifest,
)

SCHEDULES = ("polyak", "hard")


@dataclass(frozen=True)
class TargetSchedule:
    """How the target network follows the online model: ``polyak`` (target <- (1 - tau) * target + tau *
    online at every update) or ``hard`` (a copy of the online weights at every ``every``-th update, the target
    unchanged in between)."""

    kind: str = "polyak"
    tau: float = 0.05
    every: int = 1

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise ValueError(f"target schedule: expected one of {', '.join(SCHEDULES)}, got {self.kind!r}")
        if isinstance(self.tau, bool) or not isinstance(self.tau, int | float) or not 0.0 <= self.tau <= 1.0:
            raise ValueError(f"tau must be a number in [0, 1], got {self.tau!r}")
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"every must be an integer of at least 1, got {self.every!r}")

    def rate(self, update: int) -> float:
        """The averaging rate of the ``update``-th update (counted from 1)."""
        if self.kind == "polyak":
            return float(self.tau)
        return 1.0 if update % self.every == 0 else 0.0

    def describe(self) -> str:
        return f"polyak, tau={self.tau:g}" if self.kind == "polyak" else f"hard copy every {self.every} update(s)"


def update_target(target_dir: str | Path, online_dir: str | Path, schedule: TargetSchedule,
                  out_dir: str | Path | None = None) -> Path:
    """One update of the target network under ``schedule`` (the update's number is the target's
    ``ema_updates`` + 1), recorded in the new target's manifest."""
    previous = _manifest(check_model_dir(target_dir, need_tokenizer=False).resolve())
    number = int((previous.extra.get("ema_updates") or 0) if previous else 0) + 1
    return ema_update(target_dir, online_dir, schedule.rate(number), out_dir=out_dir, schedule=schedule)


def base_share(mixture: dict[str, float], base: str) -> float:
    """The weight of ``base`` in a target's mixture (0 when it is gone)."""
    return float(mixture.get(str(Path(base).resolve()), mixture.get(str(base), 0.0)))


# output head -> the input embedding it is tied to (``tie_word_embeddings``), for the architectures we train
TIED_HEADS = {"lm_head.weight": "model.embed_tokens.weight"}


def ema_update(target_dir: str | Path, online_dir: str | Path, tau: float, out_dir: str | Path | None = None,
               schedule: TargetSchedule | None = None) -> Path:
    """Write ``(1 - tau) * target + tau * online`` to ``out_dir`` (default: replace ``target_dir``).

    Both models must have the same tensors with the same shapes (a CheckpointError names the first that
    differs). Floating-point tensors are averaged in float32 (float64 stays float64) and stored in the
    target's dtype; integer buffers cannot be averaged and follow the online model. ``tau=0`` keeps every byte
    of the target and ``tau=1`` copies the online weights, exactly. Config and tokenizer files come from the
    target.
    """
    if isinstance(tau, bool) or not isinstance(tau, int | float) or not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be a number in [0, 1], got {tau!r}")
    target = check_model_dir(target_dir, need_tokenizer=False).resolve()
    online = check_model_dir(online_dir, need_tokenizer=False).resolve()
    out = Path(out_dir).resolve() if out_dir is not None else target
    if out == online:
        raise CheckpointError(f"{out}: the EMA output would overwrite the online checkpoint")
    target_files, online_files = safetensors_files(target), safetensors_files(online)
    plan = _check_compatible(target, online, target_files, online_files)

    previous, twin = _manifest(target), _manifest(online)

    def write(tmp: Path) -> None:
        _copy_side_files(target, tmp)
        if (target / SAFETENSORS_INDEX).is_file():
            shutil.copy2(target / SAFETENSORS_INDEX, tmp / SAFETENSORS_INDEX)  # same names, shapes and dtypes
        for shard, names in plan.items():
            _average_file(target_files, online_files, names, float(tau), shard, tmp / shard.name)

    _write_atomically(out, write)
    updates = int((previous.extra.get("ema_updates") or 0) if previous else 0) + 1
    extra = {"twin_of": str(online), "tau": float(tau), "ema_updates": updates,
             "online_dataset_hash": twin.dataset_hash if twin else None,
             "mixture": _mix((previous.extra.get("mixture") if previous else None) or {str(target): 1.0},
                             str(online), float(tau))}
    if schedule is not None:
        extra["schedule"] = asdict(schedule)
    write_manifest(out, Manifest(
        name=out.name, base_model=(twin and twin.base_model) or (previous and previous.base_model),
        parent=str(target), kind="ema-target", extra=extra))
    return out


def _mix(mixture: dict[str, float], online: str, tau: float) -> dict[str, float]:
    """The checkpoints a target averages after an update at rate ``tau`` (weights under 1e-9 dropped)."""
    out = {source: (1.0 - tau) * weight for source, weight in mixture.items()}
    out[online] = out.get(online, 0.0) + tau
    return {source: round(weight, 9) for source, weight in out.items() if weight >= 1e-9}


def init_target(online_dir: str | Path, target_dir: str | Path) -> Path:
    """Start a target network as an exact copy of the online checkpoint (an EMA step with tau = 1)."""
    online = check_model_dir(online_dir, need_tokenizer=False).resolve()
    target = Path(target_dir).resolve()
    if target == online:
        raise CheckpointError(f"{target}: the target must be a directory other than the online checkpoint")

    def write(tmp: Path) -> None:
        for file in online.iterdir():
            if file.is_file() and file.name != MANIFEST_NAME:
                shutil.copy2(file, tmp / file.name)

    _write_atomically(target, write)
    twin = _manifest(online)
    write_manifest(target, Manifest(name=target.name, base_model=twin.base_model if twin else None,
                                    parent=str(online), kind="ema-target",
                                    extra={"twin_of": str(online), "tau": 1.0, "ema_updates": 0,
                                           "mixture": {str(online): 1.0}}))
    return target


def _check_compatible(target: Path, online: Path, target_files: dict[str, Path],
                      online_files: dict[str, Path]) -> dict[Path, list[str]]:
    """Same tensor names and shapes on both sides; returns target shard -> its tensor names, in file order.

    A tied output head (``lm_head.weight`` saved on one side only, ``tie_word_embeddings`` in the target's
    config) is not a mismatch: it is the embedding matrix, which is averaged as such.
    """
    tied = _tied(target)
    extra_online = sorted(set(online_files) - set(target_files) - (set(TIED_HEADS) if tied else set()))
    extra_target = sorted(set(target_files) - set(online_files) - (set(TIED_HEADS) if tied else set()))
    if extra_online or extra_target:
        where = (f"{len(extra_target)} tensor(s) only in the target ({', '.join(extra_target[:3])})" if extra_target
                 else f"{len(extra_online)} tensor(s) only in the online model ({', '.join(extra_online[:3])})")
        raise CheckpointError(f"{target} and {online} are not the same architecture: {where}")
    headers: dict[Path, dict[str, Any]] = {}

    def meta(files: dict[str, Path], name: str) -> dict[str, Any]:
        file = files[name]
        if file not in headers:
            if not file.is_file():
                raise CheckpointError(f"{file}: listed in the index but missing")
            headers[file] = read_safetensors_header(file)
        if name not in headers[file]:
            raise CheckpointError(f"{file}: has no tensor {name!r} although the index says so")
        return headers[file][name]

    plan: dict[Path, list[str]] = {}
    for name in target_files:
        t = meta(target_files, name)
        if name in online_files:
            o = meta(online_files, name)
            if list(t["shape"]) != list(o["shape"]):
                raise CheckpointError(f"tensor {name!r}: shape {t['shape']} in {target} but {o['shape']} in {online}")
        plan.setdefault(target_files[name], []).append(name)
    for shard, names in plan.items():
        offsets = headers[shard]
        names.sort(key=lambda n: offsets[n]["data_offsets"][0])
    return plan


def _average_file(target_files: dict[str, Path], online_files: dict[str, Path], names: list[str], tau: float,
                  shard: Path, dest: Path) -> None:
    """Stream one output safetensors file: header from the target's, then each averaged tensor in order."""
    import torch  # lazy: only an EMA update reads tensors

    header = read_safetensors_header(shard)
    layout: dict[str, Any] = {}
    offset = 0
    for name in names:
        size = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
        layout[name] = {"dtype": header[name]["dtype"], "shape": header[name]["shape"],
                        "data_offsets": [offset, offset + size]}
        offset += size
    if "__metadata__" in header:
        layout["__metadata__"] = header["__metadata__"]
    raw = json.dumps(layout, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data must start 8-byte aligned

    opened: dict[Path, Any] = {}

    def tensor(files: dict[str, Path], name: str):
        key = name if name in files else TIED_HEADS.get(name)
        if key not in files:
            raise CheckpointError(f"{shard.parent}: tensor {name!r} is tied to a tensor the other model lacks")
        if files[key] not in opened:
            opened[files[key]] = safe_open(str(files[key]), framework="pt")
        return opened[files[key]].get_tensor(key)

    with dest.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for name in names:
            old = tensor(target_files, name)
            if tau == 0.0:
                new = old
            else:
                fresh = tensor(online_files, name)
                if tau == 1.0 or not old.is_floating_point():
                    new = fresh.to(old.dtype)
                else:
                    work = torch.float64 if old.dtype == torch.float64 else torch.float32
                    new = ((1.0 - tau) * old.to(work) + tau * fresh.to(work)).to(old.dtype)
            data = new.contiguous().reshape(-1).view(torch.uint8).numpy()
            if data.nbytes != layout[name]["data_offsets"][1] - layout[name]["data_offsets"][0]:
                raise CheckpointError(f"{shard}: tensor {name!r} has an unexpected byte size")
            fh.write(memoryview(data))


def _tied(directory: Path) -> bool:
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return bool(config.get("tie_word_embeddings", (config.get("text_config") or {}).get("tie_word_embeddings")))


def _copy_side_files(source: Path, dest: Path) -> None:
    """Config, generation config, tokenizer, chat template: every top-level file but weights and manifest."""
    for file in source.iterdir():
        if file.is_file() and file.suffix != ".safetensors" and file.name not in (MANIFEST_NAME, SAFETENSORS_INDEX):
            shutil.copy2(file, dest / file.name)


def _write_atomically(out: Path, write) -> None:
    """Build the directory in a sibling temporary folder, then swap it in.

    A directory cannot be renamed over a non-empty one, so an existing ``out`` is first renamed aside and
    removed after the swap: at every moment either the old or the new directory is complete.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    old = None
    try:
        tmp.chmod(0o755)
        write(tmp)
        if out.exists():
            old = out.with_name(f".{out.name}-old-{os.getpid()}")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and out.exists():
            shutil.rmtree(old, ignore_errors=True)


def _manifest(directory: Path) -> Manifest | None:
    try:
        return read_manifest(directory)
    except CheckpointError:
        return None


