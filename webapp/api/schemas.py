"""What the API returns and takes: pydantic schemas (django-ninja), one per resource."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field

MAX_ID = 2**63 - 1


class Error(Schema):
    detail: str
    field: str | None = None


class ProjectOut(Schema):
    id: int
    name: str
    slug: str
    domain: str
    n_trajectories: int
    n_tasks: int
    mean_reward: float | None


class TrajectoryRow(Schema):
    id: int
    project: str = Field(validation_alias="project__slug")
    task: str = Field(validation_alias="task__external_id")
    trial: int
    source_model: str
    reward: float | None
    success: bool
    termination_reason: str
    n_messages: int
    n_steps: int
    preview: str
    created_at: datetime


class TrajectoryPage(Schema):
    items: list[TrajectoryRow]
    count: int
    count_capped: bool
    next_cursor: str | None


class ToolCallOut(Schema):
    id: str
    name: str
    arguments: dict[str, Any]


class MessageOut(Schema):
    position: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None
    name: str | None
    step_index: int | None


class TrajectoryOut(Schema):
    id: int
    project: str
    task: str
    trial: int
    source_model: str
    reward: float | None
    success: bool
    termination_reason: str
    error: str
    content_hash: str
    n_steps: int
    messages: list[MessageOut]


class CritiqueOut(Schema):
    id: int
    job: int
    checkpoint: int | None
    verdict: str
    success_prob: float | None
    parse_ok: bool
    prompt_id: str
    predicted_future: str
    reasoning: str
    suggestion: str


class TargetOut(Schema):
    id: int
    job: int
    text: str
    success_prob: float | None
    prompt_id: str


class RefinementOut(Schema):
    id: int
    job: int
    refined_action: str
    valid: bool
    changed: bool
    prompt_id: str


class StepOut(Schema):
    trajectory: int
    step_index: int
    action: MessageOut
    critiques: list[CritiqueOut]
    targets: list[TargetOut]
    refinements: list[RefinementOut]


class ImportOut(Schema):
    status: str  # succeeded, failed, queued (a large file: the job imports it)
    project: str | None = None
    added: int = 0
    skipped: int = 0
    error: str = ""
    job: int | None = None


class DatasetIn(Schema):
    name: str = Field(max_length=150)
    kind: str = Field(max_length=30)
    project: str = Field(max_length=200, description="the project's slug")
    description: str = Field("", max_length=5000)
    spec: dict[str, Any] = Field(default_factory=dict, description="filter and options (see the dataset form)")
    build: bool = Field(True, description="start building v1 at once")


class SnapshotOut(Schema):
    id: int
    dataset: str
    version: int
    status: str
    n_records: int
    content_hash: str
    card: dict[str, Any]
    notes: str
    error: str
    job: int | None
    created_at: datetime
    built_at: datetime | None


class DatasetOut(Schema):
    id: int
    name: str
    kind: str
    project: str
    description: str
    spec: dict[str, Any]
    created_at: datetime
    snapshots: list[SnapshotOut]


class BuildIn(Schema):
    notes: str = Field("", max_length=5000)


class RecordOut(Schema):
    position: int
    split: str
    source: str
    trajectory: int | None
    step_index: int | None
    revision: int | None
    prompt_id: str
    data: dict[str, Any]


class RecordPage(Schema):
    items: list[RecordOut]
    next_after: int | None


class ExportIn(Schema):
    format: str = Field(max_length=40)
    split: str = Field("", max_length=20)


class ExportOut(Schema):
    id: int
    snapshot: int
    format: str
    split: str
    status: str
    n_records: int
    size_bytes: int
    job: int | None
    download: str | None


class JobIn(Schema):
    kind: str = Field(max_length=40)
    config: dict[str, Any] = Field(default_factory=dict,
                                   description="the kind's settings: see GET /api/job-kinds for each kind's schema")
    selection: dict[str, Any] = Field(default_factory=dict)


class JobKindOut(Schema):
    name: str
    label: str
    queue: str
    launchable: bool = Field(description="launched with POST /api/jobs (else by the endpoint in started_by)")
    started_by: str
    dataset_kinds: list[str] = Field(description="the snapshot kinds a job pinned to a snapshot takes")
    trains: bool
    config_schema: dict[str, Any] = Field(description="JSON Schema of its config: types, defaults, ranges, choices")


class JobOut(Schema):
    id: int
    kind: str
    status: str
    queue: str
    config: dict[str, Any]
    progress_done: int
    progress_total: int
    phase: str
    outputs: dict[str, Any]
    error: str
    checkpoint: int | None
    created_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class CheckpointOut(Schema):
    id: int
    name: str
    kind: str
    base_model: str
    parent: int | None
    produced_by: int | None
    dataset_hash: str
    size_bytes: int
    created_at: datetime
    lineage: str
    snapshot: int | None


class EvaluationOut(Schema):
    job: int
    kind: str
    checkpoint: int | None
    status: str
    outputs: dict[str, Any]
    finished_at: datetime | None
