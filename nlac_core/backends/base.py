"""The one small interface every model backend implements.

A backend turns a batch of chat requests into completions. Batching is the
default path: callers collect every request they can (all live episodes, all
steps of a chunk) and make one call, and the backend decides how to split it
into device batches. ``loglikelihood`` scores given continuations; backends
that cannot (a proprietary API) raise :class:`Unsupported`, and callers fall
back to generating and parsing.

Nothing here imports torch, transformers, vllm or an HTTP client.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

ChatMessages = list[dict[str, Any]]  # OpenAI chat shape: {"role": ..., "content": ...}


class BackendError(RuntimeError):
    """A backend could not do what it was asked (bad model path, server down, ...)."""


class Unsupported(BackendError):
    """The backend cannot do this at all (for instance log-likelihoods over an API)."""


@dataclass(frozen=True)
class SamplingSpec:
    """How to sample. ``temperature == 0`` means greedy.

    ``seed`` makes a sampled call repeatable: the same requests with the same
    spec give the same texts on the same backend and hardware. ``stop`` strings
    end a completion; the stop string itself is not part of the text.
    """

    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stop"] = list(self.stop)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingSpec:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["stop"] = tuple(known.get("stop") or ())
        return cls(**known)


def sampling_problem(k: int, temperature: float, what: str = "k > 1 futures") -> str | None:
    """The one rule for repeated draws: k > 1 samples of the same prompt need a temperature above 0 (greedy
    decoding would give k copies). Returns what is wrong, or None."""
    if k > 1 and temperature == 0:
        return f"{what} need sampling: set a temperature above 0"
    return None


@dataclass(frozen=True)
class ChatRequest:
    """One conversation to continue.

    ``assistant_prefix`` is text already written at the start of the assistant's
    reply (a section header such as ``"VERDICT:"``); the model continues it, and
    the completion's text does not repeat it.
    """

    messages: tuple[dict[str, Any], ...]
    assistant_prefix: str = ""

    def __init__(self, messages, assistant_prefix: str = "") -> None:
        object.__setattr__(self, "messages", tuple(messages))
        object.__setattr__(self, "assistant_prefix", assistant_prefix)


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one request."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (end of turn or a stop string) or "length"


@dataclass(frozen=True)
class ScoreRequest:
    """Log-likelihood of ``continuation`` as the assistant's reply (after ``assistant_prefix``)."""

    messages: tuple[dict[str, Any], ...]
    continuation: str
    assistant_prefix: str = ""

    def __init__(self, messages, continuation: str, assistant_prefix: str = "") -> None:
        object.__setattr__(self, "messages", tuple(messages))
        object.__setattr__(self, "continuation", continuation)
        object.__setattr__(self, "assistant_prefix", assistant_prefix)


@runtime_checkable
class Backend(Protocol):
    """``name`` is the registry name; ``model`` the model path or endpoint model id."""

    name: str
    model: str

    def generate(self, requests: list[ChatRequest], spec: SamplingSpec) -> list[Completion]:
        """One completion per request, in order."""
        ...

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[float]:
        """Sum of the log-probabilities of each continuation's tokens; raises Unsupported."""
        ...


@dataclass(frozen=True)
class Provenance:
    """Where a generated text came from: stored with every generated record."""

    prompt_id: str
    backend: str
    model: str
    sampling: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    @classmethod
    def of(cls, prompt_id: str, backend: Backend, spec: SamplingSpec) -> Provenance:
        return cls(prompt_id=prompt_id, backend=backend.name, model=backend.model,
                   sampling=spec.to_dict(), seed=spec.seed)


def as_requests(batch) -> list[ChatRequest]:
    """Accept ChatRequests or plain message lists (the common case) alike."""
    return [r if isinstance(r, ChatRequest) else ChatRequest(r) for r in batch]


def truncate_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """Cut ``text`` at the first stop string; True when one was found."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
