"""E3: annotators' corrections make a better critic -- the product's own loop, end to end, in one process.

    python bench/bench_corrections_loop.py           # the full run: 25/50/100 gold train steps, 40 test steps
    python bench/bench_corrections_loop.py --quick   # 2/4 gold train steps, 2 test steps: the loop, not a result
    python bench/bench_corrections_loop.py --sizes 25,50,100,200   # the curve on to 200 (about 1.5 h alone)

Cost on the 2-core CPU (SmolLM2-135M): a critique of one step is several passes over a ~500-800-token prompt
(the future, the verdict's likelihoods and their content-free baseline, the reason, the suggestion), roughly
10 s alone; a train step (batch 2, ~500-1100 tokens a record) roughly 8 s. The run critiques every chosen train
and test step once, then judges the test steps once per checkpoint (the base, then one per size):
max(sizes) + (2 + len(sizes)) x test steps critiques, and sum(sizes) / 2 train steps. The defaults (300
critiques, 88 train steps) fit about an hour alone; the quick run (12 critiques, 3 train steps) a few minutes.
The report keeps each job's wall and CPU seconds.

Data: the gpt-4o tau-bench airline run (../shared/data/tau-bench/gpt-4o-airline.json: 200 recorded episodes of
50 tasks, with the tasks' gold actions), imported through the product's import service.

The loop, every write through the product's services and jobs (run here, no broker):

1. **Which steps, and their labels.** ``nlac_core.critic_data.first_error`` places each failed episode's first
   wrong call by the task's gold actions (the ``first-errors`` CLI's labels). A first-error step is flagged
   (verdict ``suboptimal``: one flag verdict for every kind of error, so nothing hangs on telling suboptimal from
   harmful); the correct steps before it, and the steps of successful episodes, are ``optimal``. Unlocalised
   failures are left out. Each task's split is the dataset's own (``nlac_core.datasets.split_of``: fractions
   0.6 / 0 / 0.4, ``split_seed`` = ``--seed``), so no task is in two splits and the held-out human verdicts are
   of other tasks. Test steps: a seeded sample, half flagged and half optimal. Train steps: one seeded order that
   alternates flagged and optimal steps while flagged ones last (then optimal ones only); every curve point
   is a prefix of it (nested subsets).
2. **Model critiques.** critique jobs (the embedded SmolLM2-135M-Instruct, k = 1, sectioned, temperature 0) on
   exactly those steps (one job per step number, over the episodes that need that step).
3. **Corrections.** An annotator (a real user, role annotator) saves a revision of each step's model critique
   through the revision service (``check_save_revision``): the verdict from the first-error label, the reasoning
   from a template naming the wrong call and the gold one ("The agent called X(args) but the policy and the task
   require Y(args) next"), the suggestion the gold call; approve-like reasoning and "keep it" on optimal steps.
   The model's predicted future and outcome are kept (the annotator corrects the judgement, not the forecast).
   A reviewer (role reviewer) accepts each revision (``do_review``): gold.
4. **Snapshots and training.** A critic-targets dataset (``human_only``, fractions 0.6 / 0 / 0.4, the seed's
   split) is built after the test steps and each curve point's train steps are gold (build-snapshot jobs): one
   snapshot per size, its train split exactly that many gold records. A train-critic job fine-tunes the
   embedded model on each (one epoch, the same settings at every size).
5. **Evaluation.** evaluate-critic jobs judge the held-out test split (the same gold records in every version)
   of the largest snapshot: the base (the embedded model) once, then each trained checkpoint, whose base figures
   the job takes from the base's evaluation (``compare_base``). The table printed is the compare page's
   (``webapp.datasets.compare.columns`` and ``critic_table``), plus each size's AUROC gain over the base with a
   paired bootstrap interval by task (both critics' judgments of the same steps, tasks resampled together).

The critic is trained and judged on one prompt: a critic-targets record renders the sectioned evaluator prompt
(``nlac_core.prompts.nlac.TRAINED_EVALUATOR``) that evaluate-critic's sectioned critique sends. (This script's
first runs found them different, the records carrying the free mode's worked example; fixed in the product.)

Success criterion (fixed here, before any run; printed first): at the largest size, the trained critic's AUROC
of P(not optimal) on the held-out human verdicts has a by-task bootstrap 95% lower bound above 0.5 **and** above
the base checkpoint's AUROC point estimate on the same steps. Why: AUROC is threshold-free, so it measures
whether the critic ranks the steps humans flagged above the ones they approved, whatever the verdict prior that
fine-tuning on a flag share shifts; a lower bound above 0.5 says it does better than chance with whole tasks
resampled; a lower bound above the base's estimate says the gain is not within the trained critic's own task
noise. It is conservative (the base's own noise is not subtracted; the paired gain interval, reported beside,
is the tighter view). The curve over sizes is reported, not judged. A quick run checks the loop, not the
criterion (its verdict is printed all the same). The script exits 0 whether the criterion is met or not.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from _experiment import TAU_GPT4O, Experiment, add_common_args, fmt, interval

CRITERION = ("at the largest size, the trained critic's AUROC of P(not optimal) on the held-out split's human "
             "verdicts has a by-task bootstrap 95% lower bound above 0.5 and above the base checkpoint's AUROC "
             "point estimate on the same steps")
FRACTIONS = (0.6, 0.0, 0.4)
DATASET = "E3 corrections"
FLAG_VERDICT = "suboptimal"


@dataclass(frozen=True)
class Item:
    """One step to correct: its episode, step number, task key and split, and its first-error label."""

    trajectory_id: int
    step_index: int
    task_key: str
    split: str
    flagged: bool
    reasoning: str  # what the annotator writes (``correction``)
    suggestion: str


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--sizes", default="25,50,100", help="gold train steps at each curve point")
    parser.add_argument("--test-steps", type=int, default=40, help="held-out steps (half flagged)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-state-chars", type=int, default=600)
    parser.add_argument("--max-length", type=int, default=1280)
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if args.quick:
        sizes, args.test_steps = [2, 4], 2
    if not sizes or sizes[0] < 1 or args.test_steps < 2:
        parser.error("sizes must be whole numbers of at least 1, and --test-steps at least 2")

    exp = Experiment("corrections-loop", args)
    exp.criterion(CRITERION)
    exp.say(f"E3 on {TAU_GPT4O.name}: gold train sizes {sizes}, {args.test_steps} test steps, seed {args.seed}, "
            f"splits {FRACTIONS} by task (split_seed {args.seed}); training {args.epochs:g} epoch(s) at lr "
            f"{args.learning_rate:g} (batch {args.batch_size}, max_length {args.max_length}); states cut to "
            f"{args.max_state_chars} chars")
    exp.result("sizes", sizes)
    project = exp.import_file(TAU_GPT4O, "E3 airline gpt-4o")
    train_order, test = choose_steps(exp, project, sizes, args)
    pool = train_order[:sizes[-1]]
    critiques = critique_steps(exp, [*pool, *test], args)
    annotator, reviewer = people()
    correct(test, critiques, annotator, reviewer)
    exp.say(f"  {len(test)} test steps corrected and accepted ({sum(i.flagged for i in test)} flagged); e.g.")
    for item in (next(i for i in test if i.flagged), next(i for i in test if not i.flagged)):
        exp.say(f"    {'flagged' if item.flagged else 'optimal'}: {item.reasoning} / {item.suggestion}")
    dataset = make_dataset(exp, project, args)
    curve: list[dict[str, Any]] = []
    done = 0
    for size in sizes:
        correct(pool[done:size], critiques, annotator, reviewer)
        done = size
        snapshot = build(exp, dataset, size, len(test))
        steps = max(1, math.ceil(args.epochs * size / args.batch_size))
        trained = job(exp, "train-critic", {
            "snapshot": snapshot.pk, "name": f"E3 critic {size} gold", "max_steps": steps,
            "learning_rate": args.learning_rate, "per_device_batch_size": args.batch_size,
            "max_length": args.max_length, "seed": args.seed, "max_state_chars": args.max_state_chars},
            label=f"train-critic on {size} gold")
        if trained.get("records") != size:
            raise SystemExit(f"train-critic trained on {trained.get('records')} records, not {size}")
        curve.append({"size": size, "flagged_train": sum(i.flagged for i in pool[:size]), "snapshot": snapshot.pk,
                      "train_job": trained["_job"], "checkpoint": trained["checkpoint_produced"],
                      "train_loss": trained.get("train_loss"), "train_steps": trained.get("steps")})
    last = snapshot
    splits = check_splits(exp, dataset, test)
    evaluate(exp, last, curve, args)
    report(exp, last, curve)
    exp.result("splits", splits)
    exp.result("cpu_seconds_total", round(time.process_time(), 1))
    exp.say(f"CPU time of this process: {time.process_time():.0f} s")
    exp.finish()
    return 0


def job(exp: Experiment, kind: str, config: dict[str, Any], selection: dict[str, Any] | None = None,
        label: str = "") -> dict[str, Any]:
    """``exp.job``, with the CPU seconds this process spent on it (every thread) kept in the report: on a shared
    machine they, not the wall time, say what a run alone would take."""
    started = time.process_time()
    out = exp.job(kind, config, selection, label=label)
    exp.out.setdefault("cpu_seconds", {})[f"{out['_job']} {label or kind}"] = round(time.process_time() - started, 1)
    return out


# -- 1. which steps ---------------------------------------------------------------------------------------------

def choose_steps(exp: Experiment, project, sizes: list[int], args) -> tuple[list[Item], list[Item]]:
    """Every first-error label of the run, split by task; the seeded train order and the test sample."""
    from nlac_core.critic_data import first_error
    from nlac_core.datasets import split_of
    from nlac_core.evaluation import is_success
    from nlac_core.state import steps_of
    from webapp.trajectories.services.exports import iter_with_ids

    flagged: dict[str, list[Item]] = defaultdict(list)
    optimal: dict[str, list[Item]] = defaultdict(list)
    unlocalised = 0
    for tid, record in iter_with_ids(project.trajectories.order_by("id")):
        if record.reward is None:
            continue
        key = f"{project.pk}:{record.task.external_id}"  # the snapshot's task key (datasets.services.build)
        split = split_of(key, FRACTIONS, args.seed)
        views = steps_of(record)
        error = first_error(record)
        if error is None and not is_success(record):
            unlocalised += 1
            continue
        end = error.step_index if error is not None else len(views)
        for view in views[:end]:
            message = view.action
            if not message.meta.get("scripted") and not message.meta.get("action_error"):
                optimal[split].append(Item(tid, view.index, key, split, False, *correction(message, None)))
        if error is not None and not views[error.step_index].action.meta.get("scripted"):
            flagged[split].append(Item(tid, error.step_index, key, split, True,
                                       *correction(views[error.step_index].action, error)))
    rng = random.Random(args.seed)
    for group in (*flagged.values(), *optimal.values()):
        rng.shuffle(group)
    half = min(args.test_steps // 2, len(flagged["test"]))
    test = flagged["test"][:half] + optimal["test"][:args.test_steps - half]
    order: list[Item] = []
    f, o = flagged["train"], optimal["train"]
    for n in range(max(len(f), len(o))):
        order += ([f[n]] if n < len(f) else []) + ([o[n]] if n < len(o) else [])
    if len(order) < sizes[-1] or len(test) < args.test_steps:
        raise SystemExit(f"only {len(order)} train and {len(test)} test steps are labelled")
    exp.say(f"first-error labels: {sum(map(len, flagged.values()))} flagged and {sum(map(len, optimal.values()))} "
            f"optimal steps ({unlocalised} failed episodes not localised, left out); train {len(f)} flagged / "
            f"{len(o)} optimal, test {len(flagged['test'])} / {len(optimal['test'])}; chosen: test {len(test)} "
            f"({half} flagged), train order of {sizes[-1]} ({sum(i.flagged for i in order[:sizes[-1]])} flagged)")
    exp.result("labels", {"flagged": {s: len(v) for s, v in flagged.items()},
                          "optimal": {s: len(v) for s, v in optimal.items()}, "unlocalised_failures": unlocalised})
    return order, sorted(test, key=lambda i: (i.trajectory_id, i.step_index))


# -- 2. model critiques -----------------------------------------------------------------------------------------

def critique_steps(exp: Experiment, items: list[Item], args) -> dict[tuple[int, int], Any]:
    """critique jobs on exactly these steps: one per step number, over the episodes that need it."""
    from webapp.jobs.models import StepCritique

    by_index: dict[int, list[int]] = defaultdict(list)
    for item in items:
        by_index[item.step_index].append(item.trajectory_id)
    jobs = []
    for index, ids in sorted(by_index.items()):
        out = job(exp, "critique", {"steps": str(index), "max_steps": len(ids), "chunk_size": 8, "batch_size": 8,
                                   "max_state_chars": args.max_state_chars, "seed": args.seed},
                      {"trajectory_ids": sorted(set(ids))}, label=f"critique step {index} of {len(ids)} episodes")
        jobs.append(out["_job"])
    rows = {(c.trajectory_id, c.step_index): c for c in StepCritique.objects.filter(job_id__in=jobs)}
    missing = [(i.trajectory_id, i.step_index) for i in items if (i.trajectory_id, i.step_index) not in rows]
    if missing:
        raise SystemExit(f"no model critique of {len(missing)} chosen steps, e.g. {missing[0]}")
    verdicts: dict[str, int] = defaultdict(int)
    for item in items:
        verdicts[rows[(item.trajectory_id, item.step_index)].verdict or "none"] += 1
    exp.say(f"  model critiques of the {len(items)} chosen steps by {len(jobs)} critique jobs: {dict(verdicts)}")
    exp.result("model_verdicts", dict(verdicts))
    return rows


# -- 3. corrections ---------------------------------------------------------------------------------------------

def people():
    from webapp.accounts.services import do_create_user

    annotator = do_create_user("e3-annotator", "e3-annotator-pw-1", "annotator")[0]
    reviewer = do_create_user("e3-reviewer", "e3-reviewer-pw-1", "reviewer")[0]
    return annotator, reviewer


def cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def call_text(name: str, arguments: dict[str, Any], keys: list[str] | None = None, limit: int = 160) -> str:
    """name(key=value, ...) with the values as JSON, only ``keys`` when given; cut at ``limit``."""
    import json

    shown = [f"{k}={json.dumps(arguments.get(k), ensure_ascii=False)}" for k in (arguments if keys is None else keys)]
    return cut(f"{name}({', '.join(shown)})", limit)


def correction(message, error) -> tuple[str, str]:
    """(reasoning, suggestion) of the annotator's correction of a step. A first error names the wrong call (only
    the arguments that differ, when it is the expected tool with wrong values) and the gold call expected there;
    an optimal step gets approve-like reasoning and "keep it"."""
    from nlac_core.critic_data import render_gold

    expected = error.expected if error is not None else None
    call = None
    if message.tool_calls:
        call = next((c for c in message.tool_calls if expected and c.name == expected.get("name")),
                    message.tool_calls[0])
        did = f"called {call_text(call.name, call.arguments)}"
    else:
        did = f'replied "{cut(message.content or "", 100)}"'
    if error is None:
        return f"The agent {did}: this follows the policy and keeps the task on its path; nothing needs to change.", \
            "keep it"
    if expected is None:
        return (f"The agent {did} but the task needs no more changes: everything it asks for is done.",
                "Make no further change; tell the user it is done.")
    gold, gold_args = cut(render_gold(expected), 160), expected.get("arguments") or {}
    if call is not None and call.name == expected.get("name"):
        keys = [k for k in (expected.get("compare_args") or list(gold_args))
                if call.arguments.get(k) != gold_args.get(k)]
        if keys:  # the right tool with wrong values: name those
            did = f"called {call_text(call.name, call.arguments, keys)}"
            gold = call_text(call.name, gold_args, keys)
    return f"The agent {did} but the policy and the task require {gold} next.", f"Call {gold} instead."


def correct(items: list[Item], critiques: dict[tuple[int, int], Any], annotator, reviewer) -> None:
    """The annotator's revision of each step's model critique, saved through the revision service and accepted
    by the reviewer."""
    from webapp.annotation.services.reviews import do_review
    from webapp.annotation.services.revisions import Target, check_save_revision, model_fields

    for item in items:
        critique = critiques[(item.trajectory_id, item.step_index)]
        kept = model_fields(critique)
        fields = {"predicted_future": kept["predicted_future"], "predicted_outcome": kept["predicted_outcome"],
                  "verdict": FLAG_VERDICT if item.flagged else "optimal", "reasoning": item.reasoning,
                  "suggestion": item.suggestion}
        revision = check_save_revision(annotator, Target(critique.trajectory, item.step_index, critique), fields,
                                       None)
        do_review(reviewer, revision.annotation, revision.pk, "accept")


# -- 4. snapshots -----------------------------------------------------------------------------------------------

def make_dataset(exp: Experiment, project, args):
    from webapp.datasets.services.datasets import check_create_dataset

    return check_create_dataset(exp.researcher, DATASET, "critic_targets", project,
                                {"human_only": True, "fractions": list(FRACTIONS), "split_seed": args.seed,
                                 "max_state_chars": args.max_state_chars},
                                description="E3: annotators' corrections of model critiques, gold, split by task")


def build(exp: Experiment, dataset, size: int, n_test: int):
    """The next version, built by its build-snapshot job; its train split must be exactly ``size`` gold records
    and its test split the ``n_test`` held-out ones."""
    import time

    from webapp.datasets.models import Snapshot
    from webapp.datasets.services.datasets import do_start_build
    from webapp.jobs.models import Job
    from webapp.jobs.runners.base import execute

    snapshot, job = do_start_build(exp.researcher, dataset, notes=f"{size} gold train steps")
    started = time.monotonic()
    if execute(job.pk, "bench:1") != Job.SUCCEEDED:
        raise SystemExit(f"build of {dataset.name} failed: {Job.objects.get(pk=job.pk).error}")
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    card = snapshot.card
    exp.say(f"  build-snapshot: job {job.pk}, {time.monotonic() - started:.0f} s: {snapshot.label}, splits "
            f"{card['splits']}, tasks {card['tasks_per_split']}, sources {card['counts_by_source']}")
    exp.say(f"    train records: {fit(snapshot, exp.args.max_length)}")
    gold_train = snapshot.records.filter(split="train", source="gold").count()
    if gold_train != size or card["splits"]["train"] != size or card["splits"]["test"] != n_test:
        raise SystemExit(f"{snapshot.label}: {card['splits']} ({gold_train} gold train), expected {size} train "
                         f"and {n_test} test records")
    return snapshot


def fit(snapshot, max_length: int) -> str:
    """How the train records fit ``max_length`` tokens (the trainer cuts longer ones at the end: the completion)."""
    from transformers import AutoTokenizer

    from webapp.datasets.services.build import snapshot_records
    from webapp.jobs.services.checkpoints import embedded_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(embedded_checkpoint().path)
    lengths = [len(tokenizer(t)["input_ids"]) for t in (
        tokenizer.apply_chat_template(r["prompt"] + r["completion"], tokenize=False)
        for r in snapshot_records(snapshot, "train"))]
    return (f"{len(lengths)}, {min(lengths)}-{max(lengths)} tokens, {sum(n > max_length for n in lengths)} longer "
            f"than max_length {max_length}")


def check_splits(exp: Experiment, dataset, test: list[Item]) -> dict[str, Any]:
    """Every version's train and test tasks are disjoint, and the test split is the same gold revisions in each."""
    tests, out = set(), {}
    for snapshot in dataset.snapshots.order_by("version"):
        tasks: dict[str, set[str]] = defaultdict(set)
        for split, key in snapshot.records.values_list("split", "task_key"):
            tasks[split].add(key)
        if tasks["train"] & tasks["test"]:
            raise SystemExit(f"{snapshot.label}: tasks in both splits: {sorted(tasks['train'] & tasks['test'])}")
        tests.add(tuple(sorted(snapshot.records.filter(split="test").values_list("revision_id", flat=True))))
        out[f"v{snapshot.version}"] = {"train_tasks": sorted(tasks["train"]), "test_tasks": sorted(tasks["test"]),
                                       "train_records": snapshot.card["splits"]["train"],
                                       "test_records": snapshot.card["splits"]["test"]}
    if len(tests) != 1 or len(next(iter(tests))) != len(test):
        raise SystemExit("the test split differs between the versions")
    last = out[max(out, key=lambda v: int(v[1:]))]
    exp.say(f"splits by task: train {len(last['train_tasks'])} tasks, test {len(last['test_tasks'])} tasks, none in "
            f"both (every version); the test split is the same {len(test)} gold revisions in every version")
    return out


# -- 5. evaluation ----------------------------------------------------------------------------------------------

def evaluate(exp: Experiment, snapshot, curve: list[dict[str, Any]], args) -> None:
    common = {"snapshot": snapshot.pk, "split": "test", "max_steps": 100_000, "chunk_size": 8, "batch_size": 8,
              "max_state_chars": args.max_state_chars}
    base = job(exp, "evaluate-critic", common, label="evaluate-critic: base")
    exp.result("base_job", base["_job"])
    for point in curve:
        out = job(exp, "evaluate-critic", {**common, "checkpoint": point["checkpoint"]},
                      label=f"evaluate-critic: trained on {point['size']} gold")
        point["evaluate_job"] = out["_job"]
        point["trained"] = out["critic"]
        point["base"] = out.get("base") or {}
        if point["base"].get("from_job") != base["_job"]:
            raise SystemExit(f"the evaluation of the {point['size']}-gold critic judged its base again instead of "
                             f"taking job {base['_job']}'s judgments: {point['base'].get('from_job')}")
        point["gain"] = paired_gain(base["_job"], out["_job"], snapshot, seed=args.seed)


def paired_gain(base_job: int, trained_job: int, snapshot, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """AUROC(trained) - AUROC(base) on the same held-out steps, with a bootstrap 95% interval that resamples
    whole tasks and scores both critics on each resample."""
    from nlac_core.critic_eval import auroc_of
    from webapp.jobs.configs import EvaluateCriticJob
    from webapp.jobs.models import StepCritique
    from webapp.jobs.runners.evaluate_critic import held_out, judged_items

    items = held_out(EvaluateCriticJob(snapshot=snapshot.pk, split="test", max_steps=100_000))
    judged = {}
    for name, job in (("base", base_job), ("trained", trained_job)):
        rows = {(c.trajectory_id, c.step_index): c for c in StepCritique.objects.filter(job_id=job)}
        judged[name] = judged_items(items, rows, "critic_targets")
    if len(judged["base"]) != len(judged["trained"]):
        return {"gain": None, "ci95": None, "why": "the two critics judged different steps"}
    by_task: dict[str, list[int]] = defaultdict(list)
    for n, j in enumerate(judged["trained"]):
        by_task[j.task].append(n)
    base_auc, trained_auc = auroc_of(judged["base"]), auroc_of(judged["trained"])
    if base_auc is None or trained_auc is None:
        return {"gain": None, "ci95": None, "why": "AUROC undefined"}
    rng = random.Random(seed)
    tasks = sorted(by_task)
    gains = []
    for _ in range(resamples):
        picked = [n for t in rng.choices(tasks, k=len(tasks)) for n in by_task[t]]
        a = auroc_of([judged["trained"][n] for n in picked])
        b = auroc_of([judged["base"][n] for n in picked])
        if a is not None and b is not None:
            gains.append(a - b)
    gains.sort()
    ci = [gains[int(0.025 * (len(gains) - 1))], gains[int(0.975 * (len(gains) - 1))]] if len(gains) >= 100 else None
    return {"gain": trained_auc - base_auc, "ci95": ci, "resamples": len(gains)}


def report(exp: Experiment, snapshot, curve: list[dict[str, Any]]) -> None:
    """The compare page's rows for the base and every trained checkpoint, then the curve and the criterion."""
    from webapp.datasets.compare import columns, critic_table
    from webapp.jobs.models import Checkpoint

    base_pk = (curve[0]["base"] or {}).get("checkpoint")
    checkpoints = [Checkpoint.objects.get(pk=pk) for pk in (base_pk, *(p["checkpoint"] for p in curve))]
    cols = columns(checkpoints, snapshot.pk, "test")
    table = critic_table([(c.report, c.base) for c in cols])
    first = cols[0].report
    m = first.get("majority") or {}
    exp.say(f"\nheld-out test split of {snapshot.label}: {first.get('n')} human verdicts of {first.get('tasks')} "
            f"tasks, {first.get('positives')} flagged; majority class '{m.get('label')}': balanced accuracy "
            f"{fmt(m.get('balanced_accuracy'))}, AUROC {fmt(m.get('auroc'))}")
    ids = "&".join(f"id={c.pk}" for c in checkpoints)
    exp.say(f"compare page /checkpoints/compare/?{ids}&snapshot={snapshot.pk}&split=test (its rows):")
    names = [c.checkpoint.name for c in cols]
    width = 24
    exp.say(f"{'':<46}" + "".join(f"{name[:width]:<{width}}" for name in names))
    for _, label, cells in table:
        exp.say(f"{label[:45]:<46}" + "".join(f"{value:<{width}}" for value, _ in cells))
    exp.say(f"{'base (same steps, from the base evaluation)':<46}" + "".join(
        f"{(base or '-'):<{width}}" for _, base in table[0][2]))
    for c in cols:
        for key, why in (c.report.get("undefined") or {}).items():
            exp.say(f"  {c.checkpoint.name}: {key} undefined: {why}")
    exp.say("\ncurve: gold train steps -> AUROC of the trained critic [95% CI by task], gain over the base "
            "[paired 95% CI by task]")
    for point in curve:
        t, g = point["trained"], point["gain"]
        exp.say(f"  {point['size']:>4} gold ({point['flagged_train']:>3} flagged), loss {fmt(point['train_loss'])}: "
                f"AUROC {fmt(t.get('auroc'))} {interval(t.get('auroc_ci95'))}, balanced accuracy "
                f"{fmt(t.get('balanced_accuracy'))}, positivity {fmt(t.get('positivity'))}; gain "
                f"{fmt(g.get('gain'), '+.3f')} {interval(g.get('ci95'))} over the base's "
                f"{fmt(point['base'].get('auroc'))}")
    final = curve[-1]
    lower = (final["trained"].get("auroc_ci95") or [None])[0]
    base_auc = final["base"].get("auroc")
    met = lower is not None and base_auc is not None and lower > 0.5 and lower > base_auc
    exp.say(f"\ncriterion: {CRITERION}\n  at {final['size']} gold: trained lower bound {fmt(lower)}, base AUROC "
            f"{fmt(base_auc)} -> {'MET' if met else 'NOT MET'}"
            + (" (a quick run: too few steps to mean anything)" if exp.args.quick else ""))
    keep = ("n", "tasks", "positives", "auroc", "auroc_ci95", "balanced_accuracy", "balanced_accuracy_ci95",
            "false_alarm_rate", "false_alarm_rate_ci95", "recall", "recall_ci95", "positivity", "brier",
            "base_rate_brier", "undefined", "majority")
    exp.result("curve", [{**{k: v for k, v in p.items() if k not in ("trained", "base")},
                          "trained": {k: p["trained"].get(k) for k in keep},
                          "base": {k: p["base"].get(k) for k in (*keep, "checkpoint", "from_job")}} for p in curve])
    exp.result("compare_table", [{"key": key, "label": label, "columns": dict(zip(names, cells, strict=True))}
                                 for key, label, cells in table])
    exp.result("criterion_met", met)


if __name__ == "__main__":
    sys.exit(main())
