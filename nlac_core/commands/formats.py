"""detect, stats, convert: reading benchmark files without a model."""

from __future__ import annotations

import collections
import sys

from nlac_core.formats import FORMATS, detect, nlac_jsonl, read
from nlac_core.metrics import pass_hat_ks
from nlac_core.records import TrajectoryRecord


def trajectories(path: str, fmt: str | None = None):
    return (i.record for i in read(path, fmt) if isinstance(i.record, TrajectoryRecord))


def cmd_detect(args) -> int:
    for path in args.files:
        print(f"{detect(path)}\t{path}")
    return 0


def cmd_stats(args) -> int:
    roles: collections.Counter[str] = collections.Counter()
    per_task: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    rewards = []
    n = 0
    for record in trajectories(args.file, args.format):
        n += 1
        roles.update(m.role for m in record.messages)
        outcome = per_task[record.task.external_id]
        outcome[0] += 1
        outcome[1] += record.success
        if record.reward is not None:
            rewards.append(record.reward)
    print(f"format: {args.format or detect(args.file)}")
    print(f"trajectories: {n}  tasks: {len(per_task)}  messages: {sum(roles.values())}")
    print("messages by role: " + ", ".join(f"{role} {count}" for role, count in sorted(roles.items())))
    if rewards:
        print(f"mean reward: {sum(rewards) / len(rewards):.3f} over {len(rewards)} rewarded trajectories")
    ks = pass_hat_ks([tuple(v) for v in per_task.values()])
    if ks:
        print("pass^k: " + "  ".join(f"k={k} {v:.3f}" for k, v in ks.items()))
    return 0


def cmd_convert(args) -> int:
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")  # noqa: SIM115
    try:
        n = nlac_jsonl.write(trajectories(args.file, args.format), out)
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"wrote {n} trajectories", file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("detect", help="print the detected format of each file")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_detect)
    for name, func, help_text in (("stats", cmd_stats, "summarise a file"),
                                  ("convert", cmd_convert, "convert a file to NLAC Studio JSONL")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("file")
        if name == "convert":
            p.add_argument("out", help="output path, or - for stdout")
        p.add_argument("--format", choices=sorted(FORMATS))
        p.set_defaults(func=func)
