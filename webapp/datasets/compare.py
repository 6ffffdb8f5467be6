"""Checkpoints side by side: each one's latest critic evaluation against reference labels and latest policy
evaluation, as numbers and as SVG geometry (AUROC of P(flag) with its interval and the base checkpoint's, bars
for verdict accuracy and pass^k, reliability diagrams). No script, no CDN: the template draws the shapes.
The evaluate-critic job page draws one evaluation's figures with the same helpers (``critic_figures``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webapp.jobs.models import Checkpoint, Job

COLOURS = ("#2f6fdf", "#d9822b", "#2e9e5b", "#b23a48", "#7a5ccf", "#5b6b7f")
W, H, PAD = 420, 200, 34


@dataclass
class Column:
    checkpoint: Checkpoint
    colour: str
    critic: Job | None = None  # latest succeeded evaluate-critic
    policy: Job | None = None  # latest succeeded evaluate
    reliability: str = ""  # SVG points of (mean predicted, observed) per bin
    dots: list[tuple[float, float, int]] = field(default_factory=list)
    flag_reliability: str = ""  # the same for P(flag) against the reference's flag rate
    flag_dots: list[tuple[float, float, int]] = field(default_factory=list)

    @property
    def report(self) -> dict[str, Any]:
        """``nlac_core.critic_eval.critic_report`` of the evaluation ({} for one from before it existed)."""
        return (self.critic.outputs or {}).get("critic") or {} if self.critic else {}

    @property
    def base(self) -> dict[str, Any]:
        """The base checkpoint's report on the same items ({} when none was judged)."""
        base = (self.critic.outputs or {}).get("base") if self.critic else None
        return base if base and base.get("checkpoint") else {}

    @property
    def accuracy(self) -> float | None:
        return ((self.critic.outputs or {}).get("verdict") or {}).get("accuracy") if self.critic else None

    @property
    def calibration(self) -> dict[str, Any]:
        return (self.critic.outputs or {}).get("calibration") or {} if self.critic else {}

    @property
    def outcome(self) -> dict[str, Any]:
        return (self.critic.outputs or {}).get("outcome") or {} if self.critic else {}

    @property
    def pass_hat_k(self) -> dict[str, float]:
        return (self.policy.outputs or {}).get("pass_hat_k") or {} if self.policy else {}

    @property
    def environment(self) -> str:
        """Where the policy evaluation ran: environment, split and the environment's own model (an evaluation
        from before the environment model was fixed was answered by the policy itself)."""
        if self.policy is None:
            return ""
        out, config = self.policy.outputs or {}, self.policy.config or {}
        env = config.get("env", "?")
        model = out.get("env_model") or ("none" if env == "math" else "the policy itself")
        return f"{env}, split {out.get('split') or config.get('split') or 'default'}, environment model {model}"


def _x(p: float) -> float:
    return PAD + p * (W - 2 * PAD)


def _y(p: float) -> float:
    return H - PAD - p * (H - 2 * PAD)


def columns(checkpoints: list[Checkpoint], snapshot_id: int | None = None, split: str = "") -> list[Column]:
    """Each checkpoint's latest critic evaluation (on the given snapshot and split, when given: compare like
    with like) and latest policy evaluation."""
    out = []
    for i, checkpoint in enumerate(checkpoints):
        col = Column(checkpoint, COLOURS[i % len(COLOURS)])
        done = Job.objects.filter(checkpoint=checkpoint, status=Job.SUCCEEDED).order_by("-id")
        critic = done.filter(kind="evaluate-critic")
        if snapshot_id:
            critic = critic.filter(config__snapshot=snapshot_id)
        if split:
            critic = critic.filter(config__split=split)
        col.critic = critic.first()
        col.policy = done.filter(kind="evaluate").first()
        bins = [b for b in col.calibration.get("bins", []) if b.get("n")]
        col.dots, col.reliability = reliability(bins)
        col.flag_dots, col.flag_reliability = reliability(col.report.get("bins", []))
        out.append(col)
    return out


CRITIC_ROWS = (("auroc", "AUROC of P(not optimal / intervene), 95% CI by task"),
               ("balanced_accuracy", "balanced accuracy (95% CI)"),
               ("false_alarm_rate", "false-alarm rate: fine steps flagged (95% CI)"),
               ("recall", "recall: flagged steps caught (95% CI)"),
               ("positivity", "positivity: share judged optimal / approved"),
               ("brier", "Brier score of P(flag)"),
               ("base_rate_brier", "Brier score of the base rate"))


def figure(report: dict[str, Any], key: str) -> str:
    """One figure of a critic report as text: the value, its interval when it has one, "undefined" (with the
    report's reason kept for the table's own row) when it could not be computed, "–" without a report."""
    if not report:
        return "–"
    value = report.get(key)
    if value is None:
        return "undefined"
    interval = report.get(f"{key}_ci95")
    return f"{value:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else f"{value:.3f}"


def critic_table(reports: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """Rows of (key, label, per column (figure, the base checkpoint's figure or ""))."""
    return [(key, label, [(figure(r, key), figure(b, key) if b else "") for r, b in reports])
            for key, label in CRITIC_ROWS]


def reliability(bins: list[dict[str, Any]]) -> tuple[list[tuple[float, float, int]], str]:
    """(dots, polyline points) of a reliability diagram's non-empty bins."""
    dots = [(round(_x(b["mean_predicted"]), 1), round(_y(b["observed"]), 1), b["n"]) for b in bins if b.get("n")]
    return dots, " ".join(f"{x},{y}" for x, y, _ in dots)


@dataclass(frozen=True)
class Interval:
    """A point with a whisker: one checkpoint's (or its base's) AUROC and 95% interval."""

    label: str
    colour: str
    x: float
    y: float
    y_lo: float
    y_hi: float
    value: float
    ci: tuple[float, float] | None
    base: bool = False


def auroc_intervals(named: list[tuple[str, str, dict[str, Any], dict[str, Any]]]) -> list[Interval]:
    """Per (label, colour, report, base report): the AUROC of P(flag) with its interval, and the base checkpoint's
    beside it (hollow); a report without an AUROC draws nothing."""
    n = max(len(named), 1)
    slot = (W - 2 * PAD) / n
    out = []
    for i, (label, colour, report, base) in enumerate(named):
        for offset, rep, is_base in ((0.35, report, False), (0.65, base, True)):
            value = (rep or {}).get("auroc")
            if value is None:
                continue
            ci = rep.get("auroc_ci95")
            lo, hi = (ci[0], ci[1]) if ci else (value, value)
            name = f"{label} (base {rep.get('name', '')})" if is_base else label
            out.append(Interval(name, colour, round(PAD + (i + offset) * slot, 1), round(_y(value), 1),
                                round(_y(lo), 1), round(_y(hi), 1), value, (lo, hi) if ci else None, is_base))
    return out


def critic_figures(outputs: dict[str, Any], name: str = "this critic") -> dict[str, Any]:
    """What the evaluate-critic job page draws: the report, the base's, the majority class, the AUROC chart and
    the reliability diagram of P(flag)."""
    report = outputs.get("critic") or {}
    base = outputs.get("base") or {}
    dots, line = reliability(report.get("bins", []))
    base = base if base.get("checkpoint") else {}
    return {"report": report, "base": base, "base_skipped": (outputs.get("base") or {}).get("skipped"),
            "table": critic_table([(report, base)]),
            "majority": report.get("majority") or {}, "undefined": report.get("undefined") or {},
            "intervals": auroc_intervals([(name, COLOURS[0], report, base)]),
            "dots": dots, "line": line, "g": GEOMETRY}


@dataclass(frozen=True)
class Bar:
    label: str
    colour: str
    x: float
    y: float
    width: float
    height: float
    value: float


def bars(values: list[tuple[str, str, float | None]]) -> list[Bar]:
    """One bar per (label, colour, value in [0, 1]); a missing value draws no bar."""
    n = max(len(values), 1)
    slot = (W - 2 * PAD) / n
    out = []
    for i, (label, colour, value) in enumerate(values):
        if value is None:
            continue
        height = value * (H - 2 * PAD)
        out.append(Bar(label, colour, round(PAD + i * slot + slot * 0.15, 1), round(H - PAD - height, 1),
                       round(slot * 0.7, 1), round(height, 1), value))
    return out


def mixed_environments(cols: list[Column]) -> list[str]:
    """The distinct environments of the policy evaluations, when there is more than one (their pass^k are then
    not comparable, and are not charted side by side)."""
    found = sorted({c.environment for c in cols if c.environment})
    return found if len(found) > 1 else []


def pass_k_bars(cols: list[Column]) -> list[Bar]:
    if mixed_environments(cols):
        return []
    ks = sorted({k for c in cols for k in c.pass_hat_k}, key=int)
    values = [(f"{c.checkpoint.name} k={k}", c.colour, c.pass_hat_k.get(k)) for k in ks for c in cols]
    return bars(values)


DIAGONAL = f"{_x(0)},{_y(0)} {_x(1)},{_y(1)}"
GEOMETRY = {"width": W, "height": H, "pad": PAD, "inner_w": W - 2 * PAD, "inner_h": H - 2 * PAD,
            "diagonal": DIAGONAL, "chance_y": _y(0.5), "right": W - PAD, "top_y": _y(1.0), "bottom_y": _y(0.0)}
