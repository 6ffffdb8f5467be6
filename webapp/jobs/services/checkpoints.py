"""The model registry: checkpoints the jobs can load, with their lineage.

The embedded SmolLM2 is registered the first time anything asks for a
checkpoint (converted first if needed); a training job registers what it
produced. A checkpoint's facts come from its directory's manifest
(``nlac_core.checkpoints``), read once at registration.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from nlac_core.backends.embedded import ensure_embedded_model
from nlac_core.checkpoints import check_model_dir, checkpoint_info
from webapp.jobs.models import Checkpoint, Job

EMBEDDED = "smollm2-135m-instruct"


def embedded_checkpoint() -> Checkpoint:
    """The embedded model's row (registering, and converting, the model on first use)."""
    existing = Checkpoint.objects.filter(name=EMBEDDED).first()
    if existing is not None and Path(existing.path, "config.json").is_file():
        return existing

    path = ensure_embedded_model(Path(settings.NLAC_MODEL_DIR))
    return do_register_checkpoint(path, name=EMBEDDED, kind="base")


def do_register_checkpoint(path: str | Path, name: str | None = None, kind: str = "",
                           produced_by: Job | None = None, parent: Checkpoint | None = None,
                           ema_of: Checkpoint | None = None) -> Checkpoint:
    """Register (or refresh) the model directory at ``path``; idempotent by path."""
    directory = check_model_dir(path).resolve()
    info = checkpoint_info(directory)
    manifest = info.manifest
    fields = {
        "name": name or (manifest.name if manifest and manifest.name else directory.name),
        "base_model": (manifest.base_model if manifest else None) or "",
        "dataset_hash": (manifest.dataset_hash if manifest else None) or "",
        "kind": kind or (manifest.kind if manifest else None) or "",
        "size_bytes": info.size_bytes,
        "manifest": manifest.to_dict() if manifest else {},
        "produced_by": produced_by,
        "parent": parent,
        "ema_of": ema_of,
    }
    try:
        with transaction.atomic():
            checkpoint, _ = Checkpoint.objects.update_or_create(path=str(directory), defaults=fields)
    except IntegrityError:  # the name is taken by another directory: keep both, tell them apart
        fields["name"] = f"{fields['name']}-{produced_by.pk if produced_by else directory.parent.name}"
        checkpoint, _ = Checkpoint.objects.update_or_create(path=str(directory), defaults=fields)
    return checkpoint


def checkpoint_for(config_checkpoint: int | None) -> Checkpoint:
    """The checkpoint a job's config names, or the embedded model."""
    if config_checkpoint is None:
        return embedded_checkpoint()
    return Checkpoint.objects.get(pk=config_checkpoint)
