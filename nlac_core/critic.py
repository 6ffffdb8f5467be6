"""The evaluator: reads k sampled futures of (s, a) and writes the critique.

Critique = predicted future, predicted outcome (P(success)), verdict
(optimal / suboptimal / harmful), reasoning and a suggestion. Three ways to
write it, chosen by ``CritiqueConfig.mode``:

- ``sectioned`` (default): one section at a time with the header pre-filled;
  OUTCOME and VERDICT chosen by log-likelihood. The structure is always there.
- ``free``: the five lines in one generation, after a worked example, parsed.
- ``free_zero_shot``: the same without the example.

Free modes keep the raw text and flag a parse failure; ``bench/bench_critique.py``
measures how often each mode yields a complete critique on real steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from nlac_core.backends.base import Backend, Provenance, SamplingSpec, sampling_problem
from nlac_core.outcome import OutcomeCalibration
from nlac_core.outputs import Critique, Future
from nlac_core.prompts.nlac import VERDICTS, evaluator_for
from nlac_core.prompts.parsing import parse_critique
from nlac_core.sections import CONTENT_FREE, best, choose, continue_line, continue_paragraph, extend
from nlac_core.successor import FUTURE_PRIMER, Transition, predict_futures

MODES = ("sectioned", "free", "free_zero_shot")
REASON_PRIMER = "The action is"
SUGGESTION_PRIMER = "The agent should"


@dataclass(frozen=True)
class CritiqueConfig:
    k: int = 1
    mode: str = "sectioned"
    future_tokens: int = 64
    text_tokens: int = 64
    free_tokens: int = 220
    temperature: float = 0.0
    seed: int = 0
    chunk_size: int = 16
    calibrate_verdicts: bool = True  # sectioned: verdict scores relative to a content-free prompt (see sections)
    outcome_calibration: OutcomeCalibration | None = None  # P(success) through a fitted Platt scaling (outcome)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if problem := sampling_problem(self.k, self.temperature):
            raise ValueError(problem)
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {self.chunk_size}")

    def spec(self, max_new_tokens: int) -> SamplingSpec:
        return SamplingSpec(max_new_tokens=max_new_tokens, temperature=self.temperature, seed=self.seed)


def render_futures(futures: Sequence[Future]) -> str:
    lines = []
    for n, f in enumerate(futures, 1):
        outcome = "" if f.success_prob is None else f" (P(success) = {f.success_prob:.2f})"
        lines.append(f"{n}. {f.text or '(no prediction)'}{outcome}")
    return "\n".join(lines)


def critique(backend: Backend, transitions: Sequence[Transition], config: CritiqueConfig | None = None,
             futures: Sequence[Sequence[Future]] | None = None) -> list[Critique]:
    """Critiques of a batch of transitions (successor futures first, unless given)."""
    config = config or CritiqueConfig()
    if futures is None:
        futures = predict_futures(backend, transitions, config.spec(config.future_tokens), config.k,
                                  sectioned=config.mode == "sectioned", calibration=config.outcome_calibration)
    # Sectioned writing enforces the format itself; a worked example would only be
    # copied word for word by a small model, so it goes without one.
    template = evaluator_for(config.mode)
    rendered = [template.render(state=t.state, action=t.action, futures=render_futures(f))
                for t, f in zip(transitions, futures, strict=True)]
    requests = [r.request() for r in rendered]
    if config.mode == "sectioned":
        return _sectioned(backend, transitions, futures, requests, config, template)
    spec = config.spec(config.free_tokens)
    provenance = Provenance.of(template.prompt_id, backend, spec)
    out = []
    for t, f, completion in zip(transitions, futures, backend.generate(requests, spec), strict=True):
        parsed = parse_critique(completion.text)
        out.append(Critique(t.ref, parsed.future, parsed.success_prob, parsed.verdict, parsed.reason,
                            parsed.suggestion, completion.text, parsed.ok, provenance, tuple(f),
                            parsed.missing, config.mode))
    return out


def mean_success(futures: Sequence[Future]) -> float | None:
    """P(success) of (s, a) as the mean over its sampled futures: a Monte Carlo estimate."""
    probs = [f.success_prob for f in futures if f.success_prob is not None]
    return sum(probs) / len(probs) if probs else None


def _sectioned(backend, transitions, futures, requests, config, template) -> list[Critique]:
    """FUTURE and OUTCOME come from the futures (one future: its text; several: the model's
    summary of them); VERDICT is chosen by likelihood (calibrated against the same prompt with
    every input "N/A" and the same OUTCOME word, unless turned off); REASON and SUGGESTION
    are written."""
    prompt_id = template.prompt_id
    spec = config.spec(config.text_tokens)
    if config.k == 1:
        future_lines = [f[0].text for f in futures]
        degenerate = [f[0].degenerate for f in futures]
    else:
        summaries = continue_paragraph(backend, requests, "FUTURE", config.spec(config.future_tokens),
                                       primer=FUTURE_PRIMER)
        future_lines = [p.text for p in summaries]
        degenerate = [p.degenerate for p in summaries]
    success = [mean_success(f) for f in futures]
    outcome_words = ["unknown" if p is None else ("success" if p >= 0.5 else "failure") for p in success]
    requests = extend(requests, [f"FUTURE: {line}\nOUTCOME: {word}"
                                 for line, word in zip(future_lines, outcome_words, strict=True)])
    baselines = None
    if config.calibrate_verdicts:
        empty = template.render(state=CONTENT_FREE, action=CONTENT_FREE, futures=CONTENT_FREE).request()
        baselines = extend([empty] * len(requests),
                           [f"FUTURE: {CONTENT_FREE}\nOUTCOME: {word}" for word in outcome_words])
    verdicts = choose(backend, requests, "VERDICT", VERDICTS, baselines=baselines)
    requests = extend(requests, [f"VERDICT: {best(p)}" for p in verdicts])
    reasons = continue_line(backend, requests, "REASON", spec, primer=REASON_PRIMER)
    requests = extend(requests, [f"REASON: {line}" for line in reasons])
    suggestions = continue_line(backend, requests, "SUGGESTION", spec, primer=SUGGESTION_PRIMER)
    provenance = Provenance.of(prompt_id, backend, spec)
    out = []
    for i, t in enumerate(transitions):
        raw = requests[i].assistant_prefix + f"SUGGESTION: {suggestions[i]}"
        parsed = parse_critique(raw)
        # An empty future is not a finished critique: flagged (not parsed, "future" missing), never trained on.
        missing = (*parsed.missing, "future") if degenerate[i] and "future" not in parsed.missing else parsed.missing
        out.append(Critique(t.ref, future_lines[i], success[i], best(verdicts[i]), reasons[i],
                            suggestions[i], raw, parsed.ok and not degenerate[i], provenance, tuple(futures[i]),
                            tuple(missing),
                            "sectioned", verdict_probs={k: round(v, 4) for k, v in verdicts[i].items()},
                            verdict_calibration="content_free" if config.calibrate_verdicts else ""))
    return out


def critique_chunks(backend: Backend, transitions: Sequence[Transition], config: CritiqueConfig | None = None,
                    on_progress: Callable[[int, int], None] | None = None,
                    should_stop: Callable[[], bool] | None = None) -> Iterator[list[Critique]]:
    """Critiques chunk by chunk, so a job can commit each chunk and a re-run skips what is done."""
    config = config or CritiqueConfig()
    total = len(transitions)
    for start in range(0, total, config.chunk_size):
        if should_stop and should_stop():
            return
        chunk = transitions[start:start + config.chunk_size]
        chunk_config = replace(config, seed=config.seed + start)
        yield critique(backend, chunk, chunk_config)
        if on_progress:
            on_progress(min(start + config.chunk_size, total), total)
