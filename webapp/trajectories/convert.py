"""The one boundary between nlac_core records and Django rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache
from operator import attrgetter

from nlac_core.records import Message as MessageRecord
from nlac_core.records import TaskRecord, ToolCall, TrajectoryRecord
from webapp.trajectories.models import Message, Task, Trajectory

PREVIEW_CHARS = 280


def _limit(model, field: str) -> int:
    return model._meta.get_field(field).max_length


@cache
def _limits() -> tuple[tuple, tuple]:
    """(record-level, per-message) checks as (field, getter, the column's max length), read from the models once."""
    fields = [("task_id", "task.external_id", Task, "external_id"), ("task.split", "task.split", Task, "split")]
    fields += [(name, name, Trajectory, name) for name in
               ("source_model", "source_checkpoint", "user_model", "termination_reason", "external_id")]
    top = tuple((label, attrgetter(path), _limit(model, column)) for label, path, model, column in fields)
    per_message = tuple((name, attrgetter(name), _limit(Message, name))
                        for name in ("tool_call_id", "name", "requestor"))
    return top, per_message


def too_long(record: TrajectoryRecord) -> tuple[str, int] | None:
    """The first value that does not fit its column, as (field, limit); None when all fit.
    PostgreSQL refuses such a row; the importer turns this into an error naming the field."""
    top, per_message = _limits()
    for label, get, limit in top:
        if len(get(record)) > limit:
            return label, limit
    for i, m in enumerate(record.messages):
        for label, get, limit in per_message:
            value = get(m)
            if value is not None and len(value) > limit:
                return f"messages[{i}].{label}", limit
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


TASK_COLUMNS = ("project_id", "external_id", "content_hash", "instruction", "gold_actions", "gold_outputs",
                "gold_answer", "split", "meta")


def task_values(record: TaskRecord, project_id: int, content_hash: str) -> tuple:
    """A Task row in TASK_COLUMNS order."""
    return (project_id, record.external_id, content_hash, record.instruction, list(record.gold_actions),
            list(record.gold_outputs), record.gold_answer, record.split, record.meta)


def preview_of(record: TrajectoryRecord) -> str:
    """The first user words, or the error: what a list row shows."""
    if record.error:
        return record.error.splitlines()[0][:PREVIEW_CHARS]
    for m in record.messages:
        if m.role == "user" and m.content:
            return " ".join(m.content.split())[:PREVIEW_CHARS]
    return (record.task.instruction or "")[:PREVIEW_CHARS]


# The columns an import writes (webapp.bulk loads them as tuples in this order): every column of the row but the
# id, which the database gives. A trajectory's first four say where it is stored (filled in by the writer); the
# rest come from its record alone (made by a reader, perhaps in another process).
CONTEXT_COLUMNS = ("project_id", "task_id", "import_batch_id", "created_at")
TRAJECTORY_COLUMNS = CONTEXT_COLUMNS + (
    "trial", "source_model", "source_model_from_file_name", "source_checkpoint", "user_model", "reward", "success",
    "reward_info", "termination_reason", "error", "cost", "usage", "external_id", "policy", "meta", "content_hash",
    "source_format", "imported_from", "record_index", "n_messages", "n_steps", "preview",
)
MESSAGE_COLUMNS = ("trajectory_id", "position", "role", "content", "tool_calls", "tool_call_id", "name",
                   "requestor", "turn_idx", "step_index", "meta")


def trajectory_values(record: TrajectoryRecord, content_hash: str, *, source_format: str, imported_from: str,
                      record_index: int | None) -> tuple:
    """A Trajectory row in TRAJECTORY_COLUMNS order, its CONTEXT_COLUMNS left None (``in_context`` fills them)."""
    messages = record.messages
    return (
        None, None, None, None,
        record.trial, record.source_model, record.source_model_from_file_name, record.source_checkpoint,
        record.user_model, record.reward, record.success, record.reward_info, record.termination_reason,
        record.error, record.cost, record.usage, record.external_id, record.policy, record.meta, content_hash,
        source_format, imported_from, record_index, len(messages), sum(1 for m in messages if m.is_agent_step),
        preview_of(record),
    )


def in_context(row: tuple | list, project_id: int, task_id: int, import_batch_id: int | None, created_at) -> tuple:
    """A row of ``trajectory_values`` with the CONTEXT_COLUMNS filled in."""
    return (project_id, task_id, import_batch_id, created_at, *row[len(CONTEXT_COLUMNS):])


def message_values(record: TrajectoryRecord, trajectory_id: int) -> Iterator[tuple]:
    """The trajectory's Message rows, in MESSAGE_COLUMNS order; its agent steps are numbered 0, 1, ..."""
    step = 0
    for position, m in enumerate(record.messages):
        step_index = None
        if m.is_agent_step:
            step_index, step = step, step + 1
        yield (trajectory_id, position, m.role, m.content,
               [{"id": tc.id, "name": tc.name, "arguments": tc.arguments, "requestor": tc.requestor}
                for tc in m.tool_calls],
               m.tool_call_id, m.name, m.requestor, m.turn_idx, step_index, m.meta)


# What ``plain_trajectory`` reads: columns of a Trajectory, its Task and its Messages (in position order).
PLAIN_TRAJECTORY_COLUMNS = (
    "id", "task_id", "trial", "source_model", "source_checkpoint", "user_model", "reward", "reward_info",
    "termination_reason", "error", "cost", "usage", "external_id", "policy", "meta", "source_model_from_file_name",
)
PLAIN_TASK_COLUMNS = ("id", "external_id", "instruction", "gold_actions", "gold_outputs", "gold_answer", "split",
                      "meta")
PLAIN_MESSAGE_COLUMNS = ("trajectory_id", "role", "content", "tool_calls", "tool_call_id", "name", "requestor",
                         "turn_idx", "meta")


def plain_trajectory(row: tuple, task: tuple, messages: list[tuple]) -> dict:
    """``records.to_dict(trajectory_record(...))`` of a stored trajectory, made straight from its row
    (PLAIN_TRAJECTORY_COLUMNS), its task's (PLAIN_TASK_COLUMNS) and its messages' (PLAIN_MESSAGE_COLUMNS), JSON
    already decoded, without a model instance or a record on the way: what exports and snapshot builds read, 10,000
    trajectories at a time (tests/webapp/test_export_plain.py checks it against the records, field by field)."""
    (_, _, trial, source_model, source_checkpoint, user_model, reward, reward_info, termination_reason, error, cost,
     usage, external_id, policy, meta, from_file_name) = row
    _, task_id, instruction, gold_actions, gold_outputs, gold_answer, split, task_meta = task
    data = {
        "task": {"external_id": task_id, "instruction": instruction, "gold_actions": list(gold_actions),
                 "gold_outputs": list(gold_outputs), "gold_answer": gold_answer, "split": split, "meta": task_meta},
        "messages": [
            {"role": role, "content": content,
             "tool_calls": [{"id": tc["id"], "name": tc["name"], "arguments": tc["arguments"],
                             "requestor": tc.get("requestor", "assistant")} for tc in tool_calls],
             "tool_call_id": tool_call_id, "name": name, "requestor": requestor, "turn_idx": turn_idx, "meta": m_meta}
            for _, role, content, tool_calls, tool_call_id, name, requestor, turn_idx, m_meta in messages],
        "trial": trial, "source_model": source_model, "source_checkpoint": source_checkpoint, "user_model": user_model,
        "reward": None if reward is None else float(reward), "reward_info": reward_info,
        "termination_reason": termination_reason, "error": error, "cost": None if cost is None else float(cost),
        "usage": usage, "external_id": external_id, "policy": policy, "meta": meta,
    }
    if from_file_name:  # SQLite gives 1 for true
        data["source_model_from_file_name"] = True
    return data


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
