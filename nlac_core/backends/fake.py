"""A scripted backend for tests where the model is beside the point.

``responder(request) -> str`` writes each reply (default: a fixed text);
``scorer(request) -> float`` scores continuations (default: shorter is likelier).
Every call is recorded in ``calls`` so tests can assert what was asked and
that it was asked in one batch.
"""

from __future__ import annotations

from collections.abc import Callable

from nlac_core.backends.base import ChatRequest, Completion, SamplingSpec, ScoreRequest, as_requests, truncate_at_stop


class FakeBackend:
    name = "fake"

    def __init__(self, model: str = "fake-model", responder: Callable[[ChatRequest], str] | None = None,
                 scorer: Callable[[ScoreRequest], float] | None = None, reply: str = "OK") -> None:
        self.model = model
        self._responder = responder or (lambda request: reply)
        self._scorer = scorer or (lambda request: -float(len(request.continuation)))
        self.calls: list[tuple[str, list]] = []

    def generate(self, requests, spec: SamplingSpec) -> list[Completion]:
        requests = as_requests(requests)
        self.calls.append(("generate", requests))
        out = []
        for request in requests:
            raw = self._responder(request)
            text, stopped = truncate_at_stop(raw, spec.stop)
            words = text.split()
            finish = "stop"
            if len(words) > spec.max_new_tokens:
                text, finish = " ".join(words[: spec.max_new_tokens]), "length"
            prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in request.messages)
            out.append(Completion(text=text, prompt_tokens=prompt_tokens,
                                  completion_tokens=len(text.split()), finish_reason=finish))
        return out

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[float]:
        self.calls.append(("loglikelihood", list(requests)))
        return [float(self._scorer(r)) for r in requests]
