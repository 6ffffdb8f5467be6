"""Building a snapshot: the dataset's steps, the best target each has, split by task, frozen as records.

``do_create_snapshot`` takes the next version number; ``do_build_snapshot`` (run by a build-snapshot job, or
directly) writes the records CHUNK trajectories at a time, hashes them as it goes, and marks the snapshot
ready with its card. A build that crashed is started again from nothing (its partial records are removed);
a ready snapshot is never built or changed again.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from nlac_core import datasets as core
from nlac_core import sft_data
from nlac_core.actions import render_action
from nlac_core.bellman import generic_policy_prompt
from nlac_core.critic import render_futures
from nlac_core.outputs import from_json
from nlac_core.records import ToolCall
from nlac_core.state import step_of
from webapp.annotation.models import Annotation
from webapp.annotation.services.queues import step_pairs
from webapp.datasets.kinds import DATASET_KINDS, DatasetKind
from webapp.datasets.models import Dataset, Snapshot, SnapshotRecord
from webapp.datasets.services.specs import DatasetSpec
from webapp.jobs.models import Job, StepCritique, StepRefinement, StepTarget, newest_per_step
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_plain, iter_with_ids

RUNTIME_MODES = ("runtime", "runtime-label")  # a runtime critic's checks and the pipeline's labels

CHUNK = 200  # trajectories read (with their messages and candidates) at a time
WRITE_BATCH = 2000

Progress = Callable[[int, int], None]


class BuildError(ValueError):
    pass


class BuildStopped(Exception):
    """The build was asked to stop (a cancelled job); the snapshot is marked failed."""


# -- versions -------------------------------------------------------------------------------------------------

def do_create_snapshot(dataset: Dataset, user, notes: str = "") -> Snapshot:
    """A new version of the dataset, to be built. Two builds started at once get two versions."""
    for _ in range(5):
        try:
            with transaction.atomic():
                version = (dataset.snapshots.aggregate(v=Max("version"))["v"] or 0) + 1
                return Snapshot.objects.create(dataset=dataset, version=version, spec=dataset.spec, notes=notes,
                                               created_by=user if getattr(user, "is_authenticated", False) else None)
        except IntegrityError:
            continue
    raise BuildError("could not take a version number (too many builds at once); try again")


# -- candidates per step --------------------------------------------------------------------------------------

def _human(ids: list[int], accepted: bool, runtime: bool = False) -> dict[tuple[int, int], Annotation]:
    """The newest live, non-skipped human correction of each step: accepted (gold) or submitted heads. A
    correction of a runtime check (about a proposal that may never have run) counts for the runtime critic only."""
    rows = Annotation.objects.filter(trajectory_id__in=ids, deleted_at=None).select_related(
        "author", "critique", "accepted_revision" if accepted else "head")
    if not runtime:
        rows = rows.exclude(critique__mode__in=RUNTIME_MODES)
    if accepted:
        rows = rows.filter(accepted_revision__isnull=False, accepted_revision__skipped=False).order_by(
            "trajectory_id", "step_index", "-accepted_revision_id")
    else:
        rows = rows.filter(state=Annotation.SUBMITTED, head__isnull=False, head__skipped=False).order_by(
            "trajectory_id", "step_index", "-head_id")
    return newest_per_step(rows)


def _rounds(rows) -> dict[tuple[int, int], list[StepCritique]]:
    """Each step's runtime checks by the newest job that checked it, in round order."""
    out: dict[tuple[int, int], list[StepCritique]] = {}
    for row in rows.order_by("trajectory_id", "step_index", "-job_id", "round"):
        checks = out.setdefault((row.trajectory_id, row.step_index), [])
        if not checks or checks[0].job_id == row.job_id:
            checks.append(row)
    return out


def _valid_targets(ids: list[int]) -> dict[tuple[int, int], StepTarget]:
    # A degenerate target (an empty composed future, nlac_core.sections) is no target; filtered here, since a
    # JSON exclude would also drop the rows stored before the flag existed.
    return newest_per_step(t for t in StepTarget.objects.filter(trajectory_id__in=ids).order_by(
        "trajectory_id", "step_index", "-id") if not t.record.get("degenerate"))


def _critiques(ids: list[int]):
    return StepCritique.objects.filter(trajectory_id__in=ids, parse_ok=True)


# candidate set -> (trajectory ids, dataset kind) -> the newest candidate of each (trajectory, step)
SOURCES: dict[str, Callable[[list[int], DatasetKind], dict[tuple[int, int], Any]]] = {
    "gold": lambda ids, kind: _human(ids, accepted=True, runtime=kind.runtime),
    "submitted": lambda ids, kind: _human(ids, accepted=False, runtime=kind.runtime),
    "bellman": lambda ids, kind: _valid_targets(ids),
    "model_critique": lambda ids, kind: _critiques(ids).exclude(mode__in=RUNTIME_MODES).newest_per_step(),
    "label": lambda ids, kind: _critiques(ids).filter(mode="runtime-label").newest_per_step(),
    "runtime": lambda ids, kind: _rounds(_critiques(ids).filter(mode="runtime")),
    "refinement": lambda ids, kind: StepRefinement.objects.filter(trajectory_id__in=ids, valid=True).newest_per_step(),
}


def _candidates(ids: list[int], kind: DatasetKind, spec: DatasetSpec) -> dict[str, dict[tuple[int, int], Any]]:
    return {source: SOURCES[source](ids, kind) for source in kind.sources_for(spec)}


# -- one record per step --------------------------------------------------------------------------------------

def _revision_of(annotation: Annotation, source: str):
    return annotation.accepted_revision if source == "gold" else annotation.head


def _human_provenance(annotation: Annotation, source: str) -> dict[str, Any]:
    revision = _revision_of(annotation, source)
    return {"source": source, "revision": revision.pk, "annotation": annotation.pk,
            "author": annotation.author.username, "critique": annotation.critique_id,
            "verdict": revision.verdict, "predicted_outcome": revision.predicted_outcome}


def _futures_text(annotation: Annotation) -> str:
    if annotation.critique is None:
        return ""
    return render_futures(from_json(annotation.critique.record).futures)


def _row(source: str, step, annotation=None, target=None, critique=None, refinement=None) -> dict[str, Any]:
    """The SnapshotRecord links of a record (everything but position, split and data)."""
    revision = _revision_of(annotation, source) if annotation is not None else None
    producer = target or critique or refinement
    return {"source": source, "step_index": step.index, "revision": revision,
            "author_id": annotation.author_id if annotation is not None else None,
            "target": target, "critique": critique or (annotation.critique if annotation is not None else None),
            "refinement": refinement, "job_id": producer.job_id if producer is not None else None}


# -- the builders the dataset kinds name (webapp.datasets.kinds): (key, step, candidates, spec, policy) -> records

def critic_target(key, step, cands, spec: DatasetSpec, policy: str):
    choice = core.Candidates(**{s: cands.get(s, {}).get(key) for s in core.CRITIC_SOURCES})
    source = core.choose_critic_target(choice, include_submitted=spec.include_submitted,
                                       include_model_critiques=spec.include_model_critiques,
                                       human_only=spec.human_only)
    if source is None:
        return None
    if source in core.HUMAN_SOURCES:
        annotation = getattr(choice, source)
        r = _revision_of(annotation, source)
        human = core.HumanCritique(r.predicted_future, r.predicted_outcome, r.verdict, r.reasoning, r.suggestion)
        record = core.human_critique_record(step, human, _futures_text(annotation),
                                            _human_provenance(annotation, source), source, spec.max_state_chars)
        return record, _row(source, step, annotation=annotation)
    if source == "bellman":
        return _bellman(step, choice.bellman, spec)
    row = choice.model_critique
    index = _OneStep(step)
    record = sft_data.critique_records([from_json(row.record)], index, max_state_chars=spec.max_state_chars)[0]
    record["source"] = "model_critique"
    record["provenance"] = {**record["provenance"], "critique": row.pk, "job": row.job_id, "flag": "model critique"}
    return record, _row("model_critique", step, critique=row)


def _bellman(step, row: StepTarget, spec: DatasetSpec):
    record = sft_data.successor_records([from_json(row.record)], _OneStep(step), spec.max_state_chars,
                                        seed=spec.split_seed)[0]
    record["source"] = "bellman"
    record["provenance"] = {**record["provenance"], "target": row.pk, "job": row.job_id}
    return record, _row("bellman", step, target=row)


def successor_target(key, step, cands, spec: DatasetSpec, policy: str):
    row = cands["bellman"].get(key)
    return None if row is None else _bellman(step, row, spec)


def _human_action(revision) -> str:
    calls = [ToolCall(id="", name=str(c.get("name", "")), arguments=c.get("arguments") or {})
             for c in revision.refined_tool_calls or [] if isinstance(c, dict)]
    parts = [render_action(revision.refined_content, None)] if revision.refined_content.strip() else []
    parts += [render_action(None, call) for call in calls]
    return "\n".join(p for p in parts if p)


def distillation(key, step, cands, spec: DatasetSpec, policy: str):
    gold = cands["gold"].get(key)
    critique = cands["model_critique"].get(key)
    verdict = gold.accepted_revision.verdict if gold is not None else (critique.verdict if critique else "")
    if spec.skip_optimal and verdict == "optimal":
        return None
    if gold is not None and (action := _human_action(gold.accepted_revision)):
        rendered = generic_policy_prompt(step, spec.max_state_chars)
        provenance = {**_human_provenance(gold, "gold"), "prompt_id": rendered.prompt_id}
        record = {"prompt": rendered.messages, "completion": [{"role": "assistant", "content": action}],
                  "source": "human_refinement", "provenance": provenance}
        return record, _row("gold", step, annotation=gold) | {"source": "human_refinement"}
    if spec.only_human_accepted:
        return None
    row = cands["refinement"].get(key)
    if row is None:
        return None
    records = sft_data.distillation_records([from_json(row.record)], _OneStep(step), only_changed=spec.only_changed,
                                            policy_prompt=lambda s: generic_policy_prompt(s, spec.max_state_chars))
    if not records:
        return None
    record = records[0]
    record["source"] = "refinement"
    record["provenance"] = {**record["provenance"], "refinement": row.pk, "job": row.job_id,
                            "critique": row.critique_id}
    return record, _row("refinement", step, refinement=row)


def runtime_critic(key, step, cands, spec: DatasetSpec, policy: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A human correction of the step (gold, then submitted) > a label of the critic-data pipeline > the model's
    runtime checks of the step, one record per revision round (each about the proposal of its round) > another
    model critique. Records of a correction or a check of a rejected proposal pair it with that proposal."""

    def record(verdict, feedback, provenance, source, action=None):
        return core.runtime_record(step, policy, verdict, feedback, provenance, source, spec.max_state_chars,
                                   action=action)

    for source in ("gold", "submitted"):
        annotation = cands.get(source, {}).get(key)
        if annotation is not None and _revision_of(annotation, source).verdict:
            r = _revision_of(annotation, source)
            judged = annotation.critique.record.get("action") if annotation.critique is not None else None
            return [(record(r.verdict, r.suggestion or r.reasoning, _human_provenance(annotation, source), source,
                            judged or None), _row(source, step, annotation=annotation))]
    label = cands.get("label", {}).get(key)
    if label is not None:
        c = from_json(label.record)
        return [(record(label.verdict, c.suggestion, {"source": "label", "critique": label.pk, "job": label.job_id,
                                                      "reason": c.reasoning}, "label", c.action or None),
                 _row("label", step, critique=label))]
    checks = cands.get("runtime", {}).get(key)
    if checks:
        out = []
        for row in checks:
            c = from_json(row.record)
            out.append((record(row.verdict, c.suggestion, {"source": "model_critique", "critique": row.pk,
                                                           "job": row.job_id, "round": row.round,
                                                           "flag": "model critique"}, "model_critique",
                               c.action or None), _row("model_critique", step, critique=row)))
        return out
    row = cands.get("model_critique", {}).get(key)
    if row is None or not row.verdict:
        return []
    c = from_json(row.record)
    return [(record(row.verdict, c.suggestion or c.reasoning, {"source": "model_critique", "critique": row.pk,
                                                               "job": row.job_id, "flag": "model critique"},
                    "model_critique"), _row("model_critique", step, critique=row))]


class _OneStep:
    """sft_data's StepIndex for the one step at hand."""

    def __init__(self, step) -> None:
        self._step = step

    def step(self, ref):
        return self._step


# -- the build ------------------------------------------------------------------------------------------------

def _task_keys(ids: list[int]) -> dict[int, str]:
    out = {}
    for start in range(0, len(ids), 5000):
        for pk, project, task in Trajectory.objects.filter(pk__in=ids[start:start + 5000]).values_list(
                "pk", "project_id", "task__external_id"):
            out[pk] = f"{project}:{task}"
    return out


def _records(snapshot: Snapshot, spec: DatasetSpec, pairs: list[tuple[int, int]],
             splits: dict[str, str], keys: dict[int, str], card: Card,
             progress: Callable[[int], None]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    kind = DATASET_KINDS[snapshot.dataset.kind]
    steps_of: dict[int, list[int]] = defaultdict(list)
    for tid, index in pairs:
        steps_of[tid].append(index)
    ids = list(steps_of)
    done = 0
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        cands = _candidates(chunk, kind, spec) if kind.per_step else {}
        if not kind.per_step:  # whole trajectories: their to_dict form, straight from the rows
            for tid, data in iter_plain(Trajectory.objects.filter(pk__in=chunk)):
                yield data, {"source": "trajectory", "split": splits[keys[tid]], "step_index": None,
                             "trajectory_id": tid}
        else:
            for tid, trajectory in iter_with_ids(Trajectory.objects.filter(pk__in=chunk)):
                split = splits[keys[tid]]
                for index in steps_of[tid]:
                    made = kind.build((tid, index), step_of(trajectory, index), cands, spec, trajectory.policy)
                    if not made:
                        card.skipped += 1
                    for record, row in made:
                        record["split"] = split
                        yield record, {**row, "split": split, "trajectory_id": tid}
        done += sum(len(steps_of[t]) for t in chunk)
        progress(done)


class Card:
    """Counts gathered while records are written: the snapshot's dataset card."""

    def __init__(self) -> None:
        self.by_source: Counter[str] = Counter()
        self.by_split: Counter[str] = Counter()
        self.prompt_ids: Counter[str] = Counter()
        self.tasks: dict[str, set[str]] = defaultdict(set)
        self.authors: set[str] = set()
        self.trajectories: set[int] = set()
        self.revisions = 0
        self.skipped = 0

    def add(self, record: dict[str, Any], row: dict[str, Any], task_key: str) -> None:
        self.by_source[row["source"]] += 1
        self.by_split[row["split"]] += 1
        self.tasks[row["split"]].add(task_key)
        self.trajectories.add(row["trajectory_id"])
        prompt_id = (record.get("provenance") or {}).get("prompt_id")
        if prompt_id:
            self.prompt_ids[prompt_id] += 1
        author = (record.get("provenance") or {}).get("author")
        if author:
            self.authors.add(author)
        if row.get("revision") is not None:
            self.revisions += 1

    def as_dict(self, kind: str, spec: DatasetSpec, n_steps: int) -> dict[str, Any]:
        return {"kind": kind, "spec": spec.to_dict(), "steps_selected": n_steps, "steps_without_target": self.skipped,
                "counts_by_source": dict(self.by_source), "splits": {s: self.by_split.get(s, 0) for s in core.SPLITS},
                "tasks_per_split": {s: len(self.tasks.get(s, ())) for s in core.SPLITS},
                "trajectories": len(self.trajectories), "prompt_ids": dict(self.prompt_ids),
                "human_revisions": self.revisions, "authors": sorted(self.authors),
                "flagged_model_critiques": self.by_source.get("model_critique", 0)}


def do_build_snapshot(snapshot: Snapshot, progress: Progress | None = None,
                      should_stop: Callable[[], bool] | None = None,
                      still_owner: Callable[[], bool] | None = None) -> Snapshot:
    """Write the snapshot's records and mark it ready. A failure removes what was written and marks it
    failed (and re-raises) -- unless ``still_owner`` says this run lost its job to another worker: then it
    leaves everything to the run that owns the build now."""
    if snapshot.status != Snapshot.BUILDING:
        raise BuildError(f"{snapshot.label} is {snapshot.status}: a snapshot is built once; build a new version")
    try:
        return _build(snapshot, progress, should_stop, still_owner)
    except BaseException as exc:
        if still_owner is not None and not still_owner():
            raise
        message = "stopped before it was built" if isinstance(exc, BuildStopped) else f"{type(exc).__name__}: {exc}"
        with transaction.atomic():
            if Snapshot.objects.filter(pk=snapshot.pk, status=Snapshot.BUILDING).update(
                    status=Snapshot.FAILED, error=message[:2000]):
                SnapshotRecord.objects.filter(snapshot=snapshot).delete()
        raise


def do_reopen_failed_build(snapshot: Snapshot) -> bool:
    """A retried build job starts its failed snapshot again (a failed snapshot holds no records)."""
    reopened = Snapshot.objects.filter(pk=snapshot.pk, status=Snapshot.FAILED).update(status=Snapshot.BUILDING,
                                                                                     error="")
    snapshot.refresh_from_db()
    return bool(reopened)


def _build(snapshot: Snapshot, progress: Progress | None, should_stop: Callable[[], bool] | None,
           still_owner: Callable[[], bool] | None) -> Snapshot:
    spec = DatasetSpec.parse(snapshot.spec)
    dataset = snapshot.dataset
    SnapshotRecord.objects.filter(snapshot=snapshot).delete()  # what a crashed run of this build left
    pairs = step_pairs(dataset.project, spec.step_filter())
    if not DATASET_KINDS[dataset.kind].per_step:  # one record per trajectory
        pairs = sorted({(t, 0) for t, _ in pairs})
    keys = _task_keys(sorted({t for t, _ in pairs}))
    splits = core.split_tasks(keys.values(), spec.fractions, spec.split_seed)
    total = len(pairs)
    card = Card()
    digest = core.ContentHash()
    batch: list[SnapshotRecord] = []
    position = 0

    def report(done: int) -> None:
        if should_stop is not None and should_stop():
            raise BuildStopped
        if progress is not None:
            progress(done, total)

    def write(rows: list[SnapshotRecord]) -> None:
        with transaction.atomic():
            if still_owner is not None and not still_owner():
                raise BuildStopped  # reaped: the run that owns the job now builds this snapshot
            SnapshotRecord.objects.bulk_create(rows)

    for record, row in _records(snapshot, spec, pairs, splits, keys, card, report):
        digest.add([row["split"], record])  # the split is part of what a snapshot is
        card.add(record, row, keys[row["trajectory_id"]])
        batch.append(SnapshotRecord(snapshot=snapshot, position=position, task_key=keys[row["trajectory_id"]],
                                    prompt_id=str((record.get("provenance") or {}).get("prompt_id", ""))[:100],
                                    data=record, **row))
        position += 1
        if len(batch) >= WRITE_BATCH:
            write(batch)
            batch.clear()
    if batch:
        write(batch)
    if position == 0:
        raise BuildError(f"no step of {dataset.project.name} has a {dataset.get_kind_display()} record "
                         f"for this filter ({total} steps matched, {card.skipped} without a target)")
    card_data = card.as_dict(dataset.kind, spec, total)
    updated = Snapshot.objects.filter(pk=snapshot.pk, status=Snapshot.BUILDING).update(
        status=Snapshot.READY, n_records=position, content_hash=digest.hexdigest(), card=card_data,
        built_at=timezone.now(), error="")
    if not updated:
        raise BuildError(f"{snapshot.label} stopped being a build in progress")
    snapshot.refresh_from_db()
    return snapshot


def do_settle(snapshot: Snapshot) -> Snapshot:
    """A build whose job ended without building it (cancelled while queued, given up by the reaper) is marked
    failed, so no page waits for it forever."""
    if snapshot.status == Snapshot.BUILDING and snapshot.job_id and Job.objects.filter(
            pk=snapshot.job_id, status__in=(Job.FAILED, Job.CANCELLED)).exists():
        do_fail_abandoned(snapshot)
        snapshot.refresh_from_db()
    return snapshot


def do_fail_abandoned(snapshot: Snapshot) -> None:
    with transaction.atomic():
        if Snapshot.objects.filter(pk=snapshot.pk, status=Snapshot.BUILDING).update(
                status=Snapshot.FAILED, error="its build job ended without building it"):
            SnapshotRecord.objects.filter(snapshot=snapshot).delete()


def snapshot_records(snapshot: Snapshot, split: str = "") -> Iterator[dict[str, Any]]:
    """The records in position order, streamed (a few thousand rows in memory at a time)."""
    rows = SnapshotRecord.objects.filter(snapshot=snapshot)
    if split:
        rows = rows.filter(split=split)
    for data in rows.order_by("position").values_list("data", flat=True).iterator(chunk_size=2000):
        yield data if isinstance(data, dict) else json.loads(data)

