"""evaluate-critic: a runtime critic against the labels of runtime-critic records, beside its base and the
majority class (``nlac_core.critic_eval``); or the report of scores computed elsewhere.

Records are a runtime-critic snapshot's lines (the Parquet/HF exports keep ``split`` and ``provenance``; a line
may carry ``task``, which the intervals resample by: without it each record counts as its own task, and the
command says so). The critic judges each record's own prompt, as the evaluate-critic job does; so on the same
records and model the figures are the job's. Critic-target records need the critic to write its own futures from
the trajectory: the evaluate-critic job does that in the app. ``--scores`` reads ``{"task", "p_flag", "flagged",
"label"}`` lines instead of running a model.
"""

from __future__ import annotations

import json

from nlac_core.commands.common import UsageError, add_backend_args, backend_from_args, read_jsonl
from nlac_core.critic_eval import Judged, critic_report, judge_runtime_records, runtime_label, summary_lines


def _records(args) -> tuple[list[dict], list[str], bool]:
    records, tasks, has_task = [], [], True
    for number, record in read_jsonl(args.records):
        if args.split and record.get("split", args.split) != args.split:
            continue
        prompt = record.get("prompt")
        if not isinstance(prompt, list) or not prompt or not all(isinstance(m, dict) for m in prompt):
            raise UsageError(f"{args.records}, line {number}: expected a \"prompt\" list of chat messages")
        if isinstance(record.get("provenance"), str):  # Parquet/HF exports keep it as a JSON string
            try:
                record["provenance"] = json.loads(record["provenance"])
            except ValueError:
                raise UsageError(f"{args.records}, line {number}: provenance is not JSON") from None
        if runtime_label(record) is None:
            if "VERDICT" in json.dumps(record.get("completion"))[:4000]:
                raise UsageError(f"{args.records}, line {number}: a critic-target record; evaluate an NLAC critic "
                                 "with the evaluate-critic job (it writes the critic's own futures)")
            continue
        task = record.get("task")
        has_task &= task is not None
        records.append(record)
        tasks.append(str(task) if task is not None else f"record {number}")
        if args.max_steps and len(records) >= args.max_steps:
            break
    if not records:
        raise UsageError(f"{args.records}: no labelled runtime-critic records"
                         + (f" in the {args.split} split" if args.split else ""))
    return records, tasks, has_task


def _scores(path: str) -> list[Judged]:
    out = []
    for number, row in read_jsonl(path):
        try:
            p = row.get("p_flag")
            out.append(Judged(str(row["task"]), None if p is None else float(p), bool(row["flagged"]),
                              bool(row["label"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{path}, line {number}: expected task, p_flag, flagged, label ({exc})") from None
    if not out:
        raise UsageError(f"{path}: no scores")
    return out


def cmd_evaluate_critic(args) -> int:
    reports = {}
    if args.scores:
        reports["scores"] = critic_report(_scores(args.scores), resamples=args.resamples, seed=args.seed)
    else:
        records, tasks, has_task = _records(args)
        if not has_task:
            print("note: the records carry no \"task\": each counts as its own task in the intervals")
        reports["critic"] = critic_report(judge_runtime_records(backend_from_args(args), records, tasks,
                                                                not args.no_calibrate),
                                          resamples=args.resamples, seed=args.seed)
        if args.base_model:
            reports["base"] = critic_report(judge_runtime_records(backend_from_args(args, "base-"), records, tasks,
                                                                  not args.no_calibrate),
                                            resamples=args.resamples, seed=args.seed)
    for name, report in reports.items():
        print("\n".join(summary_lines(name, report)))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            json.dump(reports, fh, indent=2)
        print(f"wrote {args.report}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("evaluate-critic", help="a runtime critic against labelled records: AUROC, balanced accuracy, "
                                               "false alarms (intervals by task), beside its base and the majority")
    p.add_argument("--records", help="runtime-critic records (JSONL: prompt, completion; split, provenance, task)")
    p.add_argument("--scores", help="instead of a model: JSONL of task, p_flag, flagged, label")
    p.add_argument("--split", default="test", help="only records of this split when they say (default test; "
                                                   "'' for all)")
    p.add_argument("--max-steps", type=int, default=0, help="at most this many records (0: all)")
    p.add_argument("--no-calibrate", action="store_true", help="raw likelihoods, no content-free calibration")
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", help="write the figures as JSON here")
    add_backend_args(p, what="critic")
    add_backend_args(p, "base-", what="base checkpoint to compare with (optional)")
    p.set_defaults(func=_checked)


def _checked(args) -> int:
    if bool(args.records) == bool(args.scores):
        raise UsageError("give --records (and a critic --model) or --scores")
    return cmd_evaluate_critic(args)
