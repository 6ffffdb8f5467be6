"""Writing labelled sections with a small model: one header at a time, values by choice.

``continue_line`` pre-fills ``HEADER:`` at the end of the assistant's reply so
far and lets the model write one line; ``choose`` scores each allowed value of
a categorical section by log-likelihood and returns a probability per value,
so a verdict is always one of the allowed words. Both take the whole batch of
requests and make one backend call, whatever the number of steps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from nlac_core.backends.base import Backend, ChatRequest, SamplingSpec, ScoreRequest, Unsupported
from nlac_core.prompts.parsing import parse_decision, parse_success_prob, parse_verdict


def continue_line(backend: Backend, requests: Sequence[ChatRequest], header: str, spec: SamplingSpec,
                  primer: str = "") -> list[str]:
    """For each request, the one line the model writes after ``header:`` (stripped).

    ``primer`` opens the line for the model (``"After this action,"``): a small
    model left alone after ``FUTURE:`` often ends the line at once or starts a
    list; a few words of the sentence keep it writing prose. The primer is part
    of the returned line.
    """
    if not requests:
        return []
    line_spec = replace(spec, stop=tuple(dict.fromkeys((*spec.stop, "\n"))))
    opening = f" {primer.strip()}" if primer.strip() else ""
    batch = [ChatRequest(r.messages, f"{r.assistant_prefix}{header}:{opening}") for r in requests]
    return [f"{opening}{c.text}".strip() for c in backend.generate(batch, line_spec)]


# The headers of every sectioned prompt (critique, successor, backup, runtime critic): a paragraph ends where the
# model starts the next one.
HEADERS = ("FUTURE", "OUTCOME", "VERDICT", "REASON", "SUGGESTION", "DECISION", "FEEDBACK")
_NEXT_HEADER = re.compile(r"^\s*\**\s*(?:" + "|".join(HEADERS) + r")\s*\**\s*:", re.IGNORECASE | re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+", re.MULTILINE)
RESAMPLE_TEMPERATURE = 0.8
CONTENT_FREE = "N/A"  # every input of a prompt replaced by this: the baseline of contextual calibration (choose)


@dataclass(frozen=True)
class Paragraph:
    """A section written as one paragraph. ``degenerate``: nothing but the primer (or a list opener such as
    "the agent will:") came out, even after ``attempts - 1`` resamples; callers flag it, never use it as done."""

    text: str
    degenerate: bool
    attempts: int


def continue_paragraph(backend: Backend, requests: Sequence[ChatRequest], header: str, spec: SamplingSpec,
                       primer: str = "", retries: int = 2) -> list[Paragraph]:
    """For each request, what the model writes after ``header:`` up to the next section header or its token
    budget, across line breaks, normalised to one paragraph (list markers dropped, lines joined).

    A small model often breaks the line right after the primer ("After this action, the agent will:") and
    writes the content as a list below; cutting at the first newline kept only the opener. Rows that are still
    degenerate are sampled again (``retries`` times at most, at temperature ``RESAMPLE_TEMPERATURE`` or the
    spec's if higher, each attempt with its own seed), then returned flagged.
    """
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, got {retries}")
    if not requests:
        return []
    stops = tuple(dict.fromkeys((*spec.stop, *(f"\n{h}:" for h in HEADERS))))
    opening = f" {primer.strip()}" if primer.strip() else ""
    batch = [ChatRequest(r.messages, f"{r.assistant_prefix}{header}:{opening}") for r in requests]
    out: list[Paragraph | None] = [None] * len(batch)
    todo = list(range(len(batch)))
    for attempt in range(retries + 1):
        row_spec = replace(spec, stop=stops)
        if attempt:
            row_spec = replace(row_spec, temperature=max(spec.temperature, RESAMPLE_TEMPERATURE),
                               seed=(spec.seed or 0) + 7919 * attempt)
        completions = backend.generate([batch[i] for i in todo], row_spec)
        still = []
        for i, completion in zip(todo, completions, strict=True):
            text = one_paragraph(f"{opening}{completion.text}")
            bad = is_degenerate(text, primer)
            if not bad or attempt == retries:
                out[i] = Paragraph(text, bad, attempt + 1)
            else:
                still.append(i)
        todo = still
        if not todo:
            break
    return [p for p in out if p is not None]


def one_paragraph(text: str) -> str:
    """Text up to the next section header, its lines joined into one paragraph without list markers."""
    found = _NEXT_HEADER.search(text)
    if found:
        text = text[:found.start()]
    pieces = [" ".join(line.split()) for line in _BULLET.sub("", text).splitlines()]
    out = ""
    for piece in filter(None, pieces):
        out = piece if not out else f"{out}{' ' if out[-1] in '.:;,!?' else '; '}{piece}"
    return out


def is_degenerate(text: str, primer: str = "") -> bool:
    """Nothing said beyond the primer: no word after it, or only a list opener ending in a colon ("the agent
    will:")."""
    rest = text.strip()
    if primer.strip() and rest.startswith(primer.strip()):
        rest = rest[len(primer.strip()):].strip()
    return not re.search(r"\w", rest) or rest.endswith(":")


def choose(backend: Backend, requests: Sequence[ChatRequest], header: str, options: Sequence[str],
           spec: SamplingSpec | None = None,
           baselines: Sequence[ChatRequest] | None = None) -> list[dict[str, float]]:
    """P(option) after ``header:`` for each request, from log-likelihoods (softmax over options).

    ``baselines`` (one per request) are content-free versions of the requests
    (the same prompt with the inputs replaced by "N/A"): each option's score is
    then taken relative to its score there, which removes the model's prior for
    a word whatever the input ("contextual calibration", Zhao et al. 2021). A
    small model otherwise picks its favourite word for every step. Baselines
    are scored once each, in the same backend call.

    A backend without log-likelihoods (an HTTP API) writes the line instead and
    the word it wrote gets probability 1; a word outside the options gives an
    empty dict, which callers treat as "not parsed".
    """
    if not requests:
        return []
    if baselines is not None and len(baselines) != len(requests):
        raise ValueError(f"choose: {len(baselines)} baselines for {len(requests)} requests")
    unique: dict[tuple, int] = {}
    for b in baselines or ():
        unique.setdefault(_key(b), len(unique))
    rows = [*requests, *(b for b in {_key(b): b for b in baselines or ()}.values())]
    try:
        scores = backend.loglikelihood([
            ScoreRequest(r.messages, f" {option}", f"{r.assistant_prefix}{header}:")
            for r in rows for option in options])
    except Unsupported:
        lines = continue_line(backend, requests, header, spec or SamplingSpec(max_new_tokens=8))
        return [_read_choice(line, options) for line in lines]
    n = len(options)
    out = []
    for i in range(len(requests)):
        row = scores[i * n:(i + 1) * n]
        if baselines is not None:
            j = len(requests) + unique[_key(baselines[i])]
            row = [s - b for s, b in zip(row, scores[j * n:(j + 1) * n], strict=True)]
        top = max(row)
        weights = [math.exp(s - top) for s in row]
        total = sum(weights)
        out.append({option: w / total for option, w in zip(options, weights, strict=True)})
    return out


def _key(request: ChatRequest) -> tuple:
    return (repr(request.messages), request.assistant_prefix)


def _read_choice(line: str, options: Sequence[str]) -> dict[str, float]:
    opts = set(options)
    if opts == {"success", "failure"}:
        prob = parse_success_prob(line)
        return {} if prob is None else {"success": prob, "failure": 1 - prob}
    if opts == {"optimal", "suboptimal", "harmful"}:
        value = parse_verdict(line)
    elif opts == {"approve", "intervene"}:
        value = parse_decision(line)
    else:
        value = next((o for o in options if o in line.lower()), None)
    return {o: float(o == value) for o in options} if value else {}


def best(probabilities: dict[str, float]) -> str | None:
    return max(probabilities, key=probabilities.get) if probabilities else None


def extend(requests: Sequence[ChatRequest], lines: Sequence[str]) -> list[ChatRequest]:
    """Append written lines to each request's assistant prefix (the next header follows)."""
    return [ChatRequest(r.messages, f"{r.assistant_prefix}{line}\n") for r, line in zip(requests, lines, strict=True)]
