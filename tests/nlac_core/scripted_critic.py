"""A scripted runtime critic and the helpers a scripted actor needs to read the supervisor's prompts."""

from __future__ import annotations

from collections.abc import Callable

from nlac_core.backends.fake import FakeBackend

REVIEWED = "A reviewer checked"  # how the actor's private follow-up after an intervention begins (ACTOR_FEEDBACK)


def revisions(request) -> int:
    """How many interventions the actor has been told of in this request (0 on a fresh step)."""
    return sum(1 for m in request.messages if m["role"] == "user" and str(m["content"]).startswith(REVIEWED))


def proposed(request) -> str:
    """The proposal a critic request asks about."""
    return str(request.messages[-1]["content"]).split("PROPOSED ACTION:")[-1]


def scripted_critic(stops: Callable[[str], bool], feedback: str) -> FakeBackend:
    """Intervenes (by log-likelihood) on the proposals ``stops`` picks, with ``feedback``; approves the rest."""
    def score(request):
        return 0.0 if (request.continuation.strip() == "intervene") == stops(proposed(request)) else -5.0
    return FakeBackend(model="scripted-critic", responder=lambda r: f" {feedback}", scorer=score)
