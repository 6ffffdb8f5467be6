"""Reading the labelled sections the NLAC prompts ask for, tolerantly.

Models (small ones especially) write ``**Verdict:** Optimal``, ``1. Future -``,
``Reasoning:`` or a probability instead of a word. The parser accepts those
variants, never raises, and says which fields it could not find, so that a
critique keeps the model's raw text and a parse-failure flag instead of being
lost or invented.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# canonical field -> header words that mean it
_ALIASES = {
    "future": ("future", "predicted future", "prediction", "what happens next", "what will happen"),
    "outcome": ("outcome", "predicted outcome", "result", "final outcome", "success"),
    "verdict": ("verdict", "rating", "judgment", "judgement", "assessment"),
    "reason": ("reason", "reasoning", "why", "rationale", "explanation"),
    "suggestion": ("suggestion", "better action", "improvement", "recommendation", "alternative"),
    "decision": ("decision",),
    "feedback": ("feedback",),
}
_HEADER = re.compile(
    r"^[\s>*#\-\d.)]*\**\s*(?P<name>[A-Za-z][A-Za-z ]{1,24}?)\s*\**\s*[:\-\u2013\u2014]\s*\**\s*(?P<rest>.*)$")
_NAME_OF = {alias: canonical for canonical, aliases in _ALIASES.items() for alias in aliases}

_VERDICT_WORDS = (
    ("suboptimal", "suboptimal"), ("sub-optimal", "suboptimal"), ("not optimal", "suboptimal"),
    ("could be better", "suboptimal"), ("partially", "suboptimal"), ("acceptable", "suboptimal"),
    ("harmful", "harmful"), ("wrong", "harmful"), ("incorrect", "harmful"), ("bad", "harmful"),
    ("dangerous", "harmful"), ("optimal", "optimal"), ("correct", "optimal"), ("good", "optimal"),
    ("best", "optimal"), ("right", "optimal"),
)
_DECISION_WORDS = (
    ("intervene", "intervene"), ("intervention", "intervene"), ("intervenes", "intervene"),
    ("reject", "intervene"), ("rejected", "intervene"), ("approve", "approve"), ("approved", "approve"),
    ("approves", "approve"), ("accept", "approve"), ("accepted", "approve"),
)
_PERCENT = re.compile(r"(\d{1,3}(?:\.\d+)?)\s*%")
_FRACTION = re.compile(r"(?<![\d.])(0(?:\.\d+)?|1(?:\.0+)?)(?![\d.])")


@dataclass(frozen=True)
class Sections:
    """Field name -> text for each header found; ``order`` is the order they came in."""

    fields: dict[str, str] = field(default_factory=dict)
    order: tuple[str, ...] = ()

    def get(self, name: str) -> str:
        return self.fields.get(name, "")


def split_sections(text: str) -> Sections:
    """Group lines under the last header seen. The first occurrence of a field wins
    (a model that starts over halfway does not overwrite what it said first)."""
    found: dict[str, list[str]] = {}
    order: list[str] = []
    current: str | None = None
    for line in (text or "").splitlines():
        match = _HEADER.match(line)
        name = _NAME_OF.get(match.group("name").strip().lower()) if match else None
        if name is not None:
            if name in found:
                current = None  # a repeated header: ignore the repeat
                continue
            found[name] = [match.group("rest").strip().strip("*").strip()]
            order.append(name)
            current = name
        elif current is not None and line.strip():
            found[current].append(line.strip())
    return Sections({k: " ".join(p for p in v if p).strip() for k, v in found.items()}, tuple(order))


_NEGATION = re.compile(r"\b(?:not|never|no|isn't|is not|wasn't|hardly)\s+(?:\w+\s+){0,1}$")


def _first_word(low: str, table: Sequence[tuple[str, str]]) -> tuple[int, str] | None:
    """The earliest (index, value) of a table word that stands as a whole word and is not negated
    ("not harmful" does not say harmful; "alright" does not say right)."""
    best: tuple[int, str] | None = None
    for word, value in table:
        for match in re.finditer(rf"(?<![\w-]){re.escape(word)}(?![\w-])", low):
            if _NEGATION.search(low[:match.start()]):
                continue
            if best is None or match.start() < best[0]:
                best = (match.start(), value)
            break
    return best


def parse_verdict(text: str) -> str | None:
    """optimal / suboptimal / harmful from free wording, None when it says none of them.

    The earliest whole, non-negated word decides: "Sub-optimal." is suboptimal,
    "not harmful, but suboptimal" is suboptimal, "not optimal" is suboptimal.
    """
    best = _first_word((text or "").lower(), _VERDICT_WORDS)
    return best[1] if best else None


_OUTCOME_WORDS = (("success", 1.0), ("successful", 1.0), ("succeeds", 1.0), ("succeed", 1.0),
                  ("failure", 0.0), ("fail", 0.0), ("fails", 0.0), ("failed", 0.0), ("unsuccessful", 0.0))


def parse_success_prob(text: str) -> float | None:
    """A probability of success from 'success', 'failure', '70%' or '0.7'; None when unclear.

    A value that opens the text decides ("failure after 1 more turn" is 0.0,
    "0.7 (likely success)" is 0.7); otherwise a percentage, then a bare
    probability, then a lone outcome word anywhere ("not succeed" is failure).
    """
    low = (text or "").lower().strip()
    opening = re.match(r"[\W_]*([a-z]+|\d)", low)
    if opening and opening.group(1).isalpha():
        word = dict(_OUTCOME_WORDS).get(opening.group(1))
        if word is not None:
            return word
    percent = _PERCENT.search(low)
    if percent:
        value = float(percent.group(1))
        return value / 100 if value <= 100 else None
    fraction = _FRACTION.search(low)
    if fraction:
        return float(fraction.group(1))
    values = set()
    for word, value in _OUTCOME_WORDS:
        for match in re.finditer(rf"\b{word}\b", low):
            negated = _NEGATION.search(low[:match.start()]) is not None
            values.add(1.0 - value if negated else value)
    return values.pop() if len(values) == 1 else None


def parse_decision(text: str) -> str | None:
    """approve / intervene from free wording ("no need to intervene" approves)."""
    low = (text or "").lower()
    if re.search(r"\b(?:no need to|no reason to|don't|do not|not) (?:intervene|reject)", low):
        return "approve"
    best = _first_word(low, _DECISION_WORDS)
    return best[1] if best else None


@dataclass(frozen=True)
class ParsedCritique:
    future: str
    success_prob: float | None
    verdict: str | None
    reason: str
    suggestion: str
    missing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing


CRITIQUE_FIELDS = ("future", "outcome", "verdict", "reason", "suggestion")


def parse_critique(text: str) -> ParsedCritique:
    """The five critique fields. A field is missing when its header is absent or empty,
    or (outcome, verdict) when its value is not one the format allows."""
    sections = split_sections(text)
    success_prob = parse_success_prob(sections.get("outcome")) if sections.get("outcome") else None
    verdict = parse_verdict(sections.get("verdict")) if sections.get("verdict") else None
    missing = []
    for name in CRITIQUE_FIELDS:
        if not sections.get(name):
            missing.append(name)
    if "outcome" not in missing and success_prob is None:
        missing.append("outcome")
    if "verdict" not in missing and verdict is None:
        missing.append("verdict")
    return ParsedCritique(sections.get("future"), success_prob, verdict, sections.get("reason"),
                          sections.get("suggestion"), tuple(m for m in CRITIQUE_FIELDS if m in missing))


@dataclass(frozen=True)
class ParsedFuture:
    text: str
    success_prob: float | None
    ok: bool


def parse_future(text: str) -> ParsedFuture:
    """FUTURE / OUTCOME of the successor and backup prompts; free text counts as the future."""
    sections = split_sections(text)
    future = sections.get("future")
    prob = parse_success_prob(sections.get("outcome")) if sections.get("outcome") else None
    if not future:
        body = (text or "").strip()
        return ParsedFuture(body, prob, False)
    return ParsedFuture(future, prob, prob is not None)


def parse_runtime_decision(text: str) -> tuple[str | None, str]:
    """(approve | intervene | None, feedback) from the runtime critic's two lines."""
    sections = split_sections(text)
    decision = parse_decision(sections.get("decision") or (text or "").split("\n", 1)[0])
    return decision, sections.get("feedback")
