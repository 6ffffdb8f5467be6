"""Lineage, both ways: revision -> snapshots -> training jobs -> checkpoints -> evaluations, and back.

A training job pins its snapshot in ``config.snapshot``; the checkpoint it produced names the job
(``Checkpoint.produced_by``); snapshot records name the revision, Bellman target, critique or refinement
each came from. Nothing else is needed to walk the chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count

from webapp.datasets.models import Snapshot, SnapshotRecord
from webapp.jobs.kinds import TRAINING_KINDS
from webapp.jobs.models import Checkpoint, Job


@dataclass
class CheckpointLineage:
    checkpoint: Checkpoint
    job: Job | None = None
    snapshot: Snapshot | None = None
    counts: dict[str, int] = field(default_factory=dict)  # records of the train split by source
    revisions: int = 0
    annotators: list[str] = field(default_factory=list)
    ancestors: list[Checkpoint] = field(default_factory=list)
    evaluations: list[Job] = field(default_factory=list)
    # an EMA target network: what it averages, [(name, weight, checkpoint or None)], heaviest first, and how
    mixture: list[tuple[str, float, Checkpoint | None]] = field(default_factory=list)
    schedule: str = ""

    @property
    def summary(self) -> str:
        if self.snapshot is None:
            if self.job is None:
                return "not trained here (a base model)"
            return f"trained by job {self.job.pk} on {self.job.config.get('source', '?')} of its selection"
        parts = [f"{self.revisions} gold revisions by {len(self.annotators)} annotator"
                 f"{'s' if len(self.annotators) != 1 else ''}"] if self.revisions else []
        for source, n in sorted(self.counts.items()):
            if source not in ("gold", "human_refinement"):
                parts.append(f"{n} {source.replace('_', ' ')} records")
        return f"trained on {self.snapshot.label}" + (", built from " + ", ".join(parts) if parts else "")


def checkpoint_lineage(checkpoint: Checkpoint) -> CheckpointLineage:
    out = CheckpointLineage(checkpoint)
    job = checkpoint.produced_by
    out.job = job
    seen, parent = set(), checkpoint.parent
    while parent is not None and parent.pk not in seen and len(out.ancestors) < 20:
        seen.add(parent.pk)
        out.ancestors.append(parent)
        parent = parent.parent
    out.evaluations = list(Job.objects.filter(checkpoint=checkpoint, kind__in=("evaluate-critic", "evaluate"),
                                              status=Job.SUCCEEDED).order_by("-id")[:20])
    out.mixture, out.schedule = _mixture(checkpoint.manifest or {})
    snapshot_id = (job.config or {}).get("snapshot") if job is not None else None
    if snapshot_id:
        out.snapshot = Snapshot.objects.select_related("dataset").filter(pk=snapshot_id).first()
    if out.snapshot is not None:
        train = SnapshotRecord.objects.filter(snapshot=out.snapshot, split="train")
        out.counts = dict(train.order_by().values_list("source").annotate(n=Count("id")).values_list("source", "n"))
        gold = train.filter(revision__isnull=False, source__in=("gold", "human_refinement"))
        out.revisions = gold.count()
        out.annotators = sorted({name for name in gold.values_list("author__username", flat=True) if name})
    return out


def _mixture(manifest: dict) -> tuple[list[tuple[str, float, Checkpoint | None]], str]:
    """The checkpoints an EMA target averages (``nlac_core.ema``'s manifest ``mixture``), named as registered."""
    mixture = manifest.get("mixture")
    if not isinstance(mixture, dict) or not mixture:
        return [], ""
    known = {c.path: c for c in Checkpoint.objects.filter(path__in=list(mixture))}
    rows = sorted(((known[p].name if p in known else p, float(w), known.get(p)) for p, w in mixture.items()
                   if isinstance(w, int | float)), key=lambda row: -row[1])
    schedule = manifest.get("schedule") or {}
    how = (f"Polyak, tau = {schedule.get('tau')}" if schedule.get("kind") == "polyak"
           else f"a hard copy every {schedule.get('every')} update(s)" if schedule.get("kind") == "hard" else "")
    return rows, f"{how}; {manifest.get('ema_updates', '?')} update(s)" if how else ""


@dataclass
class RevisionUses:
    snapshots: list[Snapshot]
    jobs: list[Job]
    checkpoints: list[Checkpoint]


def revision_uses(revision_ids: list[int]) -> RevisionUses:
    """The snapshots the revisions are frozen in, the training jobs on those snapshots, and their checkpoints."""
    snapshot_ids = list(SnapshotRecord.objects.filter(revision_id__in=revision_ids, snapshot__status=Snapshot.READY)
                        .order_by()
                        .values_list("snapshot_id", flat=True).distinct())
    snapshots = list(Snapshot.objects.filter(pk__in=snapshot_ids).select_related("dataset").order_by("-id"))
    jobs = list(Job.objects.filter(kind__in=TRAINING_KINDS, config__snapshot__in=snapshot_ids).order_by("-id"))
    checkpoints = list(Checkpoint.objects.filter(produced_by__in=jobs).order_by("-id"))
    return RevisionUses(snapshots, jobs, checkpoints)


def snapshot_uses(snapshot: Snapshot) -> dict[str, Any]:
    jobs = list(Job.objects.filter(config__snapshot=snapshot.pk, kind__in=(*TRAINING_KINDS, "evaluate-critic"))
                .select_related("checkpoint").order_by("-id")[:50])
    trained = [j for j in jobs if j.kind in TRAINING_KINDS]
    return {"training": trained, "evaluations": [j for j in jobs if j.kind == "evaluate-critic"],
            "checkpoints": list(Checkpoint.objects.filter(produced_by__in=trained).order_by("-id"))}
