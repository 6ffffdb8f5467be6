"""Agreement on overlapped queue items: verdicts (Cohen's kappa per annotator pair, Krippendorff's
alpha over everyone, nominal) and the text similarity of the corrected critiques."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import combinations

import krippendorff
import numpy as np

from webapp.annotation.diff import similarity
from webapp.annotation.models import VERDICTS, Assignment


def cohen_kappa(a: list[str], b: list[str]) -> float | None:
    """Cohen's kappa of two raters over the same items; None when undefined (no items, or chance = 1)."""
    if len(a) != len(b) or not a:
        return None
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


def krippendorff_alpha(units: list[dict[str, str]]) -> float | None:
    """Nominal alpha; each unit maps annotator -> verdict (missing annotators allowed)."""
    coders = sorted({c for unit in units for c in unit})
    pairable = [u for u in units if len(u) >= 2]
    if len(coders) < 2 or not pairable:
        return None

    code = {v: i for i, v in enumerate(VERDICTS)}
    data = np.full((len(coders), len(pairable)), np.nan)
    for j, unit in enumerate(pairable):
        for coder, value in unit.items():
            data[coders.index(coder), j] = code[value]
    if len({v for u in pairable for v in u.values()}) < 2:
        return 1.0  # everyone always said the same single value: perfect, though alpha itself is undefined
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


@dataclass
class PairAgreement:
    a: str
    b: str
    n_items: int
    kappa: float | None
    raw: float | None
    text_similarity: float | None


@dataclass
class QueueAgreement:
    n_items: int  # items with at least two finished annotations
    alpha: float | None
    pairs: list[PairAgreement]


def _critique_text(fields: dict) -> str:
    return " ".join(fields.get(k) or "" for k in ("predicted_future", "reasoning", "suggestion"))


def for_queue(queue) -> QueueAgreement:
    done = (Assignment.objects.filter(item__queue=queue, status=Assignment.DONE, annotation__deleted_at=None,
                                      annotation__head__isnull=False)
            .values_list("item_id", "annotator__username", "annotation__head__verdict",
                         "annotation__head__predicted_future", "annotation__head__reasoning",
                         "annotation__head__suggestion"))
    verdicts: dict[int, dict[str, str]] = defaultdict(dict)
    texts: dict[int, dict[str, str]] = defaultdict(dict)
    for item, who, verdict, future, reasoning, suggestion in done:
        texts[item][who] = _critique_text({"predicted_future": future, "reasoning": reasoning,
                                           "suggestion": suggestion})
        if verdict:
            verdicts[item][who] = verdict
    units = [u for u in verdicts.values() if len(u) >= 2]
    people = sorted({w for u in texts.values() for w in u})
    pairs = []
    for a, b in combinations(people, 2):
        shared = [i for i, u in verdicts.items() if a in u and b in u]
        va, vb = [verdicts[i][a] for i in shared], [verdicts[i][b] for i in shared]
        both_text = [i for i, u in texts.items() if a in u and b in u]
        sims = [similarity(texts[i][a], texts[i][b]) for i in both_text]
        if not shared and not both_text:
            continue
        pairs.append(PairAgreement(a, b, len(both_text), cohen_kappa(va, vb),
                                   sum(x == y for x, y in zip(va, vb, strict=True)) / len(va) if va else None,
                                   sum(sims) / len(sims) if sims else None))
    return QueueAgreement(len([u for u in texts.values() if len(u) >= 2]), krippendorff_alpha(units), pairs)
