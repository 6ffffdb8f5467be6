"""Checkpoints side by side: each one's latest critic evaluation against humans and latest policy evaluation,
as numbers and as SVG geometry (bars for verdict accuracy and pass^k, a reliability diagram per checkpoint).
No script, no CDN: the template draws the shapes."""

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
        col.dots = [(round(_x(b["mean_predicted"]), 1), round(_y(b["observed"]), 1), b["n"]) for b in bins]
        col.reliability = " ".join(f"{x},{y}" for x, y, _ in col.dots)
        out.append(col)
    return out


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
            "diagonal": DIAGONAL}
