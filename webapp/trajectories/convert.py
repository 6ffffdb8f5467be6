"""The one boundary between nlac_core records and Django rows."""

from __future__ import annotations

from collections.abc import Iterable

from nlac_core.records import Message as MessageRecord
from nlac_core.records import TaskRecord, ToolCall, TrajectoryRecord
from webapp.trajectories.models import Message, Project, Task, Trajectory

PREVIEW_CHARS = 280


def _limit(model, field: str) -> int:
    return model._meta.get_field(field).max_length


def too_long(record: TrajectoryRecord) -> tuple[str, int] | None:
    """The first value that does not fit its column, as (field, limit); None when all fit.
    PostgreSQL refuses such a row; the importer turns this into an error naming the field."""
    checks = [
        ("task_id", record.task.external_id, _limit(Task, "external_id")),
        ("task.split", record.task.split, _limit(Task, "split")),
        ("source_model", record.source_model, _limit(Trajectory, "source_model")),
        ("source_checkpoint", record.source_checkpoint, _limit(Trajectory, "source_checkpoint")),
        ("user_model", record.user_model, _limit(Trajectory, "user_model")),
        ("termination_reason", record.termination_reason, _limit(Trajectory, "termination_reason")),
        ("external_id", record.external_id, _limit(Trajectory, "external_id")),
    ]
    for i, m in enumerate(record.messages):
        checks += [(f"messages[{i}].tool_call_id", m.tool_call_id or "", _limit(Message, "tool_call_id")),
                   (f"messages[{i}].name", m.name or "", _limit(Message, "name")),
                   (f"messages[{i}].requestor", m.requestor or "", _limit(Message, "requestor"))]
    for field, value, limit in checks:
        if len(value) > limit:
            return field, limit
    return None


def task_fields(record: TaskRecord) -> dict:
    return {
        "instruction": record.instruction,
        "gold_actions": list(record.gold_actions),
        "gold_outputs": list(record.gold_outputs),
        "gold_answer": record.gold_answer,
        "split": record.split,
        "meta": record.meta,
    }


def preview_of(record: TrajectoryRecord) -> str:
    """The first user words, or the error: what a list row shows."""
    if record.error:
        return record.error.splitlines()[0][:PREVIEW_CHARS]
    for m in record.messages:
        if m.role == "user" and m.content:
            return " ".join(m.content.split())[:PREVIEW_CHARS]
    return (record.task.instruction or "")[:PREVIEW_CHARS]


def trajectory_row(
    record: TrajectoryRecord, project: Project, task: Task, content_hash: str, **provenance
) -> Trajectory:
    return Trajectory(
        project=project,
        task=task,
        trial=record.trial,
        source_model=record.source_model,
        source_model_from_file_name=record.source_model_from_file_name,
        source_checkpoint=record.source_checkpoint,
        user_model=record.user_model,
        reward=record.reward,
        success=record.success,
        reward_info=record.reward_info,
        termination_reason=record.termination_reason,
        error=record.error,
        cost=record.cost,
        usage=record.usage,
        external_id=record.external_id,
        policy=record.policy,
        meta=record.meta,
        content_hash=content_hash,
        n_messages=len(record.messages),
        n_steps=sum(1 for m in record.messages if m.is_agent_step),
        preview=preview_of(record),
        **provenance,
    )


def message_rows(record: TrajectoryRecord, trajectory_id: int) -> list[Message]:
    rows = []
    step = 0
    for position, m in enumerate(record.messages):
        step_index = None
        if m.is_agent_step:
            step_index, step = step, step + 1
        rows.append(Message(
            trajectory_id=trajectory_id,
            position=position,
            role=m.role,
            content=m.content,
            tool_calls=[{"id": tc.id, "name": tc.name, "arguments": tc.arguments, "requestor": tc.requestor}
                        for tc in m.tool_calls],
            tool_call_id=m.tool_call_id,
            name=m.name,
            requestor=m.requestor,
            turn_idx=m.turn_idx,
            step_index=step_index,
            meta=m.meta,
        ))
    return rows


def task_record(task: Task) -> TaskRecord:
    return TaskRecord(
        external_id=task.external_id,
        instruction=task.instruction,
        gold_actions=tuple(task.gold_actions),
        gold_outputs=tuple(task.gold_outputs),
        gold_answer=task.gold_answer,
        split=task.split,
        meta=task.meta,
    )


def message_record(m: Message) -> MessageRecord:
    return MessageRecord(
        role=m.role,
        content=m.content,
        tool_calls=tuple(ToolCall(**tc) for tc in m.tool_calls),
        tool_call_id=m.tool_call_id,
        name=m.name,
        requestor=m.requestor,
        turn_idx=m.turn_idx,
        meta=m.meta,
    )


def trajectory_record(t: Trajectory, messages: Iterable[Message]) -> TrajectoryRecord:
    return TrajectoryRecord(
        task=task_record(t.task),
        messages=tuple(message_record(m) for m in messages),
        trial=t.trial,
        source_model=t.source_model,
        source_model_from_file_name=t.source_model_from_file_name,
        source_checkpoint=t.source_checkpoint,
        user_model=t.user_model,
        reward=t.reward,
        reward_info=t.reward_info,
        termination_reason=t.termination_reason,
        error=t.error,
        cost=t.cost,
        usage=t.usage,
        external_id=t.external_id,
        policy=t.policy,
        meta=t.meta,
    )
