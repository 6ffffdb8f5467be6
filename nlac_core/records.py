"""Typed records: the one shape every importer produces and every exporter reads.

Frozen dataclasses so that a record can be hashed, compared and passed between
processes without anyone mutating it on the way. Django models convert to and
from these at one boundary (``webapp.trajectories.convert``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

ROLES = ("system", "user", "assistant", "tool")
REQUESTORS = ("assistant", "user")


@dataclass(frozen=True)
class ToolCall:
    """One structured tool call: never flattened to text."""

    id: str
    name: str
    arguments: dict[str, Any]
    requestor: str = "assistant"


@dataclass(frozen=True)
class Message:
    """One chat message. ``tool_call_id`` links a tool result to its call;
    ``requestor`` says whose tool a tool message answers (tau2 users have tools)."""

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    requestor: str | None = None
    turn_idx: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def is_agent_step(self) -> bool:
        """An agent step is an assistant turn: a reply, a tool call, or both."""
        return self.role == "assistant"


@dataclass(frozen=True)
class TaskRecord:
    """A task of a benchmark: the instruction (or problem) and, when known, the gold."""

    external_id: str
    instruction: str = ""
    gold_actions: tuple[dict[str, Any], ...] = ()
    gold_outputs: tuple[str, ...] = ()
    gold_answer: str | None = None
    split: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def content_hash(self) -> str:
        """Two files may use the same task id for different tasks (two benchmarks in
        one project, a harness-error stub): the id plus this hash is the task's identity."""
        return hashlib.sha256(canonical_json(_plain(self)).encode()).hexdigest()


@dataclass(frozen=True)
class TrajectoryRecord:
    """One episode of an agent on a task, as it happened."""

    task: TaskRecord
    messages: tuple[Message, ...]
    trial: int = 0
    source_model: str = ""
    source_checkpoint: str = ""
    user_model: str = ""
    reward: float | None = None
    reward_info: dict[str, Any] | None = None
    termination_reason: str = ""
    error: str = ""
    cost: float | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    external_id: str = ""
    policy: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    # True when ``source_model`` is only a label guessed from the file's name (tau-bench names its files after
    # the model): a name is no part of the episode, so the content hash leaves such a label out.
    source_model_from_file_name: bool = False

    def __post_init__(self) -> None:
        # Numbers come as int or float from JSON; a database gives floats back.
        # Normalise once so that the content hash survives a store/load round trip.
        for name in ("reward", "cost"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, float):
                object.__setattr__(self, name, float(value))

    @property
    def steps(self) -> list[tuple[int, Message]]:
        """(message index, message) of every agent step, in order."""
        return [(i, m) for i, m in enumerate(self.messages) if m.is_agent_step]

    @property
    def success(self) -> bool:
        return self.reward is not None and self.reward >= 1.0 - 1e-6

    def content_hash(self) -> str:
        """sha256 of the canonical JSON of everything that makes the episode what it is.

        Provenance (which file, which record, the file's name) is not part of the hash, so the same
        episode imported from two files, or re-imported from our own export, hashes
        the same and is stored once; a source model named by the file's contents or by the person importing
        it is part of it (the same episode attributed to another model is another run). A record whose
        label was not guessed from a file name hashes exactly as before that rule, so stored hashes stay valid.
        Computed once per record and kept (the record is frozen, and its JSON
        values are never changed in place), since every step of a trajectory names it.
        """
        cached = self.__dict__.get("_content_hash")
        if cached is None:
            data = to_dict(self)
            if self.source_model_from_file_name:
                data = {k: v for k, v in data.items() if k != "source_model_from_file_name"} | {"source_model": ""}
            cached = hashlib.sha256(canonical_trajectory_json(data).encode()).hexdigest()
            self.__dict__["_content_hash"] = cached  # frozen dataclass: bypass __setattr__, not a field
        return cached


def step_uid(content_hash: str, step_index: int) -> str:
    """Stable identity of an agent step across databases: trajectory hash + step number."""
    return f"{content_hash[:16]}:{step_index}"


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


LONG = 1024  # a policy this long is encoded once per run (encode_sparing)


def canonical_trajectory_json(data: dict[str, Any]) -> str:
    """``canonical_json`` of a trajectory's ``to_dict`` form (with what a line adds beside it, such as a schema),
    its policy encoded once per run rather than twice per episode."""
    policy = data.get("policy") or ""
    if not isinstance(policy, str) or len(policy) < LONG:
        return canonical_json(data)
    messages = [{**m, "content": MARK} if m.get("content") == policy else m for m in data["messages"]]
    times = 1 + sum(m["content"] is MARK for m in messages)
    return encode_sparing(canonical_json, data, {**data, "policy": MARK, "messages": messages}, policy, times)


# Encoding a long text once, not once per record: a run's policy (a few thousand characters) is in every one of its
# episodes, as their `policy` and as their system message, a third of what an export encodes.
MARK = "\x00nlac-repeated\x00"  # stands for the text while the rest is encoded
_ENCODED: dict[str, str] = {}


def encode_sparing(encode, value: Any, marked: Any, text: str, times: int) -> str:
    """``encode(value)`` (a JSON encoder with ``ensure_ascii=False``), made as ``encode(marked)``, ``marked`` being
    ``value`` with ``times`` of its strings equal to ``text`` replaced by MARK, and the text's encoding, made once,
    put back in their place. Should anything else encode like MARK, ``encode(value)`` is made as it is."""
    out = encode(marked)
    mark = json.dumps(MARK, ensure_ascii=False)
    if out.count(mark) != times:
        return encode(value)
    encoded = _ENCODED.get(text)
    if encoded is None:
        if len(_ENCODED) > 16:
            _ENCODED.clear()
        encoded = _ENCODED[text] = json.dumps(text, ensure_ascii=False)
    return out.replace(mark, encoded)


def to_dict(record: TrajectoryRecord) -> dict[str, Any]:
    """Plain-JSON form of a record (tuples become lists).

    Unlike ``dataclasses.asdict`` it does not deep-copy: JSON values (meta,
    arguments) are shared with the record, so treat the result as read-only.
    Hashing every imported record made asdict's copies the import's top cost.
    ``source_model_from_file_name`` appears only when true, so every other record's form (and hash) is the
    one it had before that field existed.
    """
    data = _plain(record)
    if not data["source_model_from_file_name"]:
        del data["source_model_from_file_name"]
    return data


def _plain(value: Any) -> Any:
    cls = type(value)
    if cls is tuple:
        return [v if type(v) in _AS_IS else _plain(v) for v in value]
    convert = _CONVERTERS.get(cls)
    if convert is None:
        convert = _CONVERTERS[cls] = _converter(cls)
    return convert(value)


# Values that JSON already takes as they are (the values inside meta, arguments and the like are never walked).
_AS_IS = frozenset({str, int, float, bool, type(None), dict, list})
_CONVERTERS: dict[type, Any] = {}


def _converter(cls: type):
    """The plain form of one dataclass type as a function written out field by field, made from its fields the way
    ``dataclasses`` makes ``__init__``: asking ``is_dataclass`` and ``fields`` for each of the ~300 values of a
    record made hashing it cost more than parsing it. Any other type converts to itself."""
    if not is_dataclass(cls):
        return lambda value: value
    items = ", ".join(f"{f.name!r}: (x if type(x := value.{f.name}) in _AS_IS else _plain(x))" for f in fields(cls))
    namespace: dict[str, Any] = {}
    exec(f"def plain(value):\n    return {{{items}}}", {"_AS_IS": _AS_IS, "_plain": _plain}, namespace)  # noqa: S102
    return namespace["plain"]


def from_dict(data: dict[str, Any]) -> TrajectoryRecord:
    """Inverse of :func:`to_dict`; the caller validates the shape (see formats.nlac_jsonl)."""
    task = dict(data["task"])
    task["gold_actions"] = tuple(task.get("gold_actions") or ())
    task["gold_outputs"] = tuple(task.get("gold_outputs") or ())
    messages = []
    for m in data["messages"]:
        m = dict(m)
        m["tool_calls"] = tuple(ToolCall(**tc) for tc in m.get("tool_calls") or ())
        messages.append(Message(**m))
    rest = {k: v for k, v in data.items() if k not in ("task", "messages")}
    return TrajectoryRecord(task=TaskRecord(**task), messages=tuple(messages), **rest)
