"""Writing a snapshot to a file (or a directory) in one of the export formats, streamed.

The same function serves the export job (progress, a temporary name renamed at the end so a download
link never points at half a file) and ``manage.py export_dataset``.
"""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from nlac_core.formats import dataset_exports as ex
from webapp.datasets.kinds import DATASET_KINDS
from webapp.datasets.models import Export, Snapshot
from webapp.datasets.services.build import snapshot_records
from webapp.jobs.models import Job


class ExportError(ValueError):
    pass


def formats_for(kind: str) -> tuple[str, ...]:
    return DATASET_KINDS[kind].export_formats


FORMAT_LABELS = {"jsonl": "chat JSONL (messages; TRL SFTTrainer)", "jsonl-prompt-completion":
                 "prompt/completion JSONL (TRL)", "parquet": "Parquet", "hf": "Hugging Face datasets directory",
                 "nlac-jsonl": "lossless trajectory JSONL (re-importable)", "tau-bench": "tau-bench results JSON"}


def check_format(snapshot: Snapshot, fmt: str, split: str = "") -> None:
    allowed = formats_for(snapshot.dataset.kind)
    if fmt not in allowed:
        raise ExportError(f"format: a {snapshot.dataset.get_kind_display()} snapshot exports as "
                          f"{', '.join(allowed)}; got {fmt!r}")
    if split and split not in ("train", "validation", "test"):
        raise ExportError(f"split: expected train, validation or test, got {split!r}")
    if fmt == "hf" and split:
        raise ExportError("split: a Hugging Face directory holds every split; leave the split empty")
    if snapshot.status != Snapshot.READY:
        raise ExportError(f"{snapshot.label} is {snapshot.status}: only a built snapshot can be exported")


def write(snapshot: Snapshot, fmt: str, out: Path, split: str = "",
          progress: Callable[[int], None] | None = None) -> int:
    """Write the snapshot (or one split) to ``out`` (a directory for ``hf``); the number of records."""
    check_format(snapshot, fmt, split)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    records = snapshot_records(snapshot, split)
    if fmt == "hf":
        try:
            counts = ex.write_hf_dataset(lambda s: snapshot_records(snapshot, s), out, progress)
        except ValueError as exc:
            raise ExportError(f"out: {exc}") from None
        return sum(counts.values())
    if out.is_dir():
        raise ExportError(f"out: {out} is a directory; give a file name")
    if fmt == "parquet":
        return ex.write_parquet(records, out, progress)
    with out.open("w", encoding="utf-8") as f:
        if not DATASET_KINDS[snapshot.dataset.kind].per_step:  # whole trajectories
            writer = {"nlac-jsonl": ex.write_trajectories_jsonl, "tau-bench": ex.write_tau_bench,
                      "jsonl": ex.write_trajectories_chat}[fmt]
            return writer(records, f, progress)
        return ex.write_jsonl(records, f, "messages" if fmt == "jsonl" else "prompt_completion", progress)


def export_dir() -> Path:
    return Path(settings.NLAC_JOBS_DIR) / "exports"


def file_name(export: Export) -> str:
    s = export.snapshot
    base = f"{s.dataset.name}-v{s.version}".replace("/", "_").replace(" ", "_")
    suffix = f"-{export.split}" if export.split else ""
    ext = ".tar.gz" if export.format == "hf" else ex.EXTENSIONS[export.format]
    tag = "" if export.format in ("jsonl", "parquet", "hf", "tau-bench") else f"-{export.format}"
    return f"{base}{suffix}{tag}{ext}"


def do_write_export(export: Export, attempt: int, progress: Callable[[int], None] | None = None) -> Export:
    """The export job's work: write under a temporary name, then rename; an hf directory is packed as .tar.gz."""
    folder = export_dir() / f"export-{export.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / file_name(export)
    tmp = folder / f".{attempt}.part"
    if tmp.is_dir():
        shutil.rmtree(tmp)
    tmp.unlink(missing_ok=True)
    Export.objects.filter(pk=export.pk).update(status=Export.RUNNING)
    if export.format == "hf":
        directory = folder / f".{attempt}.dir"
        if directory.exists():
            shutil.rmtree(directory)  # this export's own leftover from a crashed attempt
        n = write(export.snapshot, "hf", directory, progress=progress)
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(directory, arcname=final.name.removesuffix(".tar.gz"))
        shutil.rmtree(directory)
    else:
        n = write(export.snapshot, export.format, tmp, export.split, progress)
    tmp.replace(final)
    Export.objects.filter(pk=export.pk).update(status=Export.READY, path=str(final), n_records=n,
                                               size_bytes=final.stat().st_size)
    export.refresh_from_db()
    return export


def do_settle_exports(snapshot: Snapshot) -> None:
    """Exports whose job ended without writing them (cancelled while queued, given up) are marked failed."""
    Export.objects.filter(snapshot=snapshot, status__in=(Export.QUEUED, Export.RUNNING),
                          job__status__in=(Job.FAILED, Job.CANCELLED)).update(status=Export.FAILED)
