"""A line chart of a job's metrics series as SVG geometry (the template draws it; no script, no CDN)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

WIDTH, HEIGHT, PAD = 560, 180, 32


@dataclass(frozen=True)
class Chart:
    title: str
    points: str  # "x,y x,y ..." in SVG units
    x_label: str
    y_min: float
    y_max: float
    x_max: float
    n: int


def line_chart(metrics: list[dict[str, Any]], y_key: str, x_key: str) -> Chart | None:
    """The series ``y_key`` over ``x_key`` (non-numeric and missing values are skipped); None when empty."""
    pairs = []
    for point in metrics:
        x, y = point.get(x_key), point.get(y_key)
        if isinstance(x, int | float) and isinstance(y, int | float) and math.isfinite(x) and math.isfinite(y):
            pairs.append((float(x), float(y)))
    if not pairs:
        return None
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y0 == y1:
        y0, y1 = y0 - 1, y1 + 1
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1

    def sx(x: float) -> float:
        return PAD + (x - x0) / (x1 - x0) * (WIDTH - 2 * PAD)

    def sy(y: float) -> float:
        return HEIGHT - PAD - (y - y0) / (y1 - y0) * (HEIGHT - 2 * PAD)

    points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pairs)
    return Chart(title=y_key, points=points, x_label=x_key, y_min=y0, y_max=y1, x_max=max(xs), n=len(pairs))


def charts_for(metrics: list[dict[str, Any]]) -> list[Chart]:
    """Loss over training steps and reward over episodes, whichever the job reported."""
    out = []
    for y_key, x_key in (("loss", "step"), ("tokens_per_s", "step"), ("reward", "episode")):
        chart = line_chart(metrics, y_key, x_key)
        if chart is not None:
            out.append(chart)
    return out
