"""Checkpoint directories and their manifest, ``nlac_manifest.json``.

Every model directory the product writes (a trained critic, a distilled policy,
an EMA target, the converted embedded model) carries a manifest that says what
it is and where it came from: the lineage edits -> dataset -> job -> checkpoint
-> evaluation ends here. The manifest is written last, so a directory with a
manifest is a complete checkpoint; one without is unfinished or foreign.

Pure Python: no torch. Safetensors headers are read by hand (8-byte length,
then JSON) so that listing checkpoints in the web process stays cheap.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nlac_core
from nlac_core.records import canonical_json

MANIFEST_NAME = "nlac_manifest.json"
SAFETENSORS_INDEX = "model.safetensors.index.json"
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


class CheckpointError(ValueError):
    """A directory is not a usable model directory, or its files are malformed; the message names it."""


class ManifestError(CheckpointError):
    """``nlac_manifest.json`` is missing or malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Manifest:
    """What a checkpoint is. Fields beyond the known ones (``converted_from``, ``twin_of``, ``tau``,
    ``stopped_early``...) live in ``extra`` and round-trip unchanged."""

    name: str
    base_model: str | None = None
    parent: str | None = None
    kind: str | None = None
    dataset_hash: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    code_version: str | None = None
    created: str | None = None
    size_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in _KNOWN}
        data.update(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "manifest") -> Manifest:
        _check_fields(data, where)
        known = {k: data[k] for k in _KNOWN if k in data}
        for key in ("config", "metrics"):
            if known.get(key) is None:
                known[key] = {}
        return cls(**known, extra={k: v for k, v in data.items() if k not in _KNOWN})


_KNOWN = ("name", "base_model", "parent", "kind", "dataset_hash", "config", "metrics", "code_version", "created",
          "size_bytes")
# field -> (allowed types, whether None is allowed)
_TYPES: dict[str, tuple[tuple[type, ...], bool]] = {
    "name": ((str,), False), "base_model": ((str,), True), "parent": ((str,), True), "kind": ((str,), True),
    "dataset_hash": ((str,), True), "config": ((dict,), True), "metrics": ((dict,), True),
    "code_version": ((str,), True), "created": ((str,), True), "size_bytes": ((int,), True),
}


def _check_fields(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if "name" not in data:
        raise ManifestError(f"{where}: field 'name' is missing")
    for key, (types, nullable) in _TYPES.items():
        if key not in data or (data[key] is None and nullable):
            continue
        value = data[key]
        if not isinstance(value, types) or isinstance(value, bool):
            raise ManifestError(f"{where}: field {key!r} must be {' or '.join(t.__name__ for t in types)}"
                                f"{' or null' if nullable else ''}, got {type(value).__name__}")


def manifest_path(path: str | Path) -> Path:
    """The manifest file of a checkpoint directory (or the file itself when given one)."""
    path = Path(path)
    return path if path.name == MANIFEST_NAME or path.is_file() else path / MANIFEST_NAME


def read_manifest(path: str | Path) -> Manifest:
    """Read a checkpoint's manifest; a missing or malformed one is a ManifestError naming the file."""
    file = manifest_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{file}: no manifest (not a checkpoint written by NLAC Studio, or unfinished)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{file}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    return Manifest.from_dict(data, where=str(file))


def write_manifest(directory: str | Path, manifest: Manifest | dict[str, Any]) -> Manifest:
    """Write the manifest atomically (temporary file + rename), filling created, code version and size.

    Called last when a checkpoint is written: its presence marks the directory complete.
    """
    directory = Path(directory)
    if isinstance(manifest, dict):
        manifest = Manifest.from_dict(manifest)
    data = manifest.to_dict()
    data["created"] = data.get("created") or datetime.now(UTC).isoformat(timespec="seconds")
    data["code_version"] = data.get("code_version") or code_version()
    data["size_bytes"] = checkpoint_size(directory)
    _check_fields(data, str(directory / MANIFEST_NAME))
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False, default=str)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, directory / MANIFEST_NAME)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return Manifest.from_dict(data)


def dataset_hash(records: Iterable[dict[str, Any]]) -> str:
    """sha256 over the canonical JSON of each record, in order (a reordered dataset is another dataset).

    Hashes parsed records, not file bytes, so the same records written with other spacing hash the same.
    """
    digest = hashlib.sha256()
    for record in records:
        digest.update(canonical_json(record).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``nlac_core.__version__`` plus the git commit of this checkout when there is one (never fails)."""
    version = nlac_core.__version__
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=Path(nlac_core.__file__).parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return version
    commit = out.stdout.strip()
    return f"{version}+git.{commit}" if out.returncode == 0 and commit else version


def checkpoint_size(directory: str | Path) -> int:
    """Bytes of the files directly in the directory (the model a deployment copies), manifest excluded.

    Sub-directories (the trainer state kept for resuming, a LoRA adapter) are not part of the model.
    """
    return sum(p.stat().st_size for p in Path(directory).iterdir() if p.is_file() and p.name != MANIFEST_NAME)


def weight_files(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    return sorted({p for pattern in WEIGHT_PATTERNS for p in directory.glob(pattern)})


def check_model_dir(path: str | Path, need_tokenizer: bool = True) -> Path:
    """The path of a loadable HF model directory, or a CheckpointError saying what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a model directory (models load from local paths only)")
    if not (path / "config.json").is_file():
        raise CheckpointError(f"{path}: not a model directory (no config.json)")
    if not weight_files(path):
        raise CheckpointError(f"{path}: no weights (no *.safetensors or pytorch_model*.bin)")
    if need_tokenizer and not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointError(f"{path}: no tokenizer (none of {', '.join(TOKENIZER_FILES)})")
    return path


def read_safetensors_header(file: str | Path) -> dict[str, Any]:
    """The JSON header of a safetensors file: tensor name -> dtype, shape, data_offsets (and __metadata__)."""
    file = Path(file)
    with file.open("rb") as fh:
        head = fh.read(8)
        if len(head) != 8:
            raise CheckpointError(f"{file}: not a safetensors file (shorter than its 8-byte header length)")
        (length,) = struct.unpack("<Q", head)
        if length > 100_000_000:
            raise CheckpointError(f"{file}: not a safetensors file (header length {length})")
        raw = fh.read(length)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CheckpointError(f"{file}: not a safetensors file (malformed header)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{file}: not a safetensors file (header is not an object)")
    return header


def safetensors_files(directory: str | Path) -> dict[str, Path]:
    """tensor name -> the safetensors file holding it, for one file or a sharded index."""
    directory = Path(directory)
    index = directory / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise CheckpointError(f"{index}: malformed index (expected an object with a 'weight_map')") from None
        return {name: directory / shard for name, shard in weight_map.items()}
    single = directory / "model.safetensors"
    if not single.is_file():
        raise CheckpointError(f"{directory}: no model.safetensors or {SAFETENSORS_INDEX}")
    return {name: single for name in read_safetensors_header(single) if name != "__metadata__"}


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint at a glance, for listings: read from the manifest, config and safetensors headers only."""

    path: Path
    manifest: Manifest | None
    model_type: str | None
    num_parameters: int | None
    size_bytes: int
    complete: bool  # a manifest is present (written last)


def checkpoint_info(directory: str | Path) -> CheckpointInfo:
    """Summarise a checkpoint directory without loading any weights."""
    directory = check_model_dir(directory, need_tokenizer=False)
    manifest = read_manifest(directory) if (directory / MANIFEST_NAME).is_file() else None
    try:
        model_type = json.loads((directory / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (json.JSONDecodeError, AttributeError):
        raise CheckpointError(f"{directory / 'config.json'}: not valid JSON") from None
    try:
        headers = {file: read_safetensors_header(file) for file in set(safetensors_files(directory).values())}
        num_parameters = sum(_numel(meta["shape"]) for header in headers.values()
                             for name, meta in header.items() if name != "__metadata__")
    except CheckpointError:
        num_parameters = None
    return CheckpointInfo(path=directory, manifest=manifest, model_type=model_type, num_parameters=num_parameters,
                          size_bytes=checkpoint_size(directory), complete=manifest is not None)


def _numel(shape: list[int]) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return n
