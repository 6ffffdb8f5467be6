"""SFT on 1 process vs N processes (accelerate launch, DDP): tokens/s and loss agreement, same data and seed.

    python bench/bench_sft_processes.py [--processes 2] [--steps 8] [--global-batch 4] [--max-length 384] [--quick]

The data: real agent steps of the gpt-4o tau-bench airline run (``bench_sft.examples``). Both arms train the
embedded model from the same seed on the same global batch (1 process: the whole batch; N processes: 1/N of it
each), through ``nlac_core.training.train``, as the CLI and the worker do. On CPU the processes talk over gloo;
on CUDA (``gpu_check.py`` calls ``compare``) over NCCL, one GPU each, in bf16.

Success criterion, set before the run: every logged step's loss of the N-process run within 1e-3 (relative)
of the 1-process run's, and the same number of tokens trained. Throughput is reported, not judged: on this
2-core machine both processes share the same cores, so no speed-up is expected; "wall" includes starting the
processes and loading the model in each.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from _setup import ROOT  # noqa: F401  (puts the checkout on sys.path)
from bench_sft import examples

REL_TOL = 1e-3


def run_arm(records, processes: int, steps: int, global_batch: int, max_length: int, bf16: bool | None,
            out: Path) -> dict:
    from nlac_core.backends.embedded import ensure_embedded_model
    from nlac_core.training import LaunchConfig, SFTRunConfig, train

    config = SFTRunConfig(max_steps=steps, per_device_batch_size=global_batch // processes, max_length=max_length,
                          learning_rate=1e-4, seed=0, bf16=bf16, save_steps=10_000)
    events = []
    started = time.perf_counter()
    result = train(records, ensure_embedded_model(), out, config, LaunchConfig(processes=processes),
                   on_progress=events.append, resume=False)
    wall = time.perf_counter() - started
    return {"processes": processes, "losses": [e.loss for e in events], "wall_s": wall, **result.metrics}


def compare(processes: int, steps: int, global_batch: int, max_length: int, bf16: bool | None = None) -> dict:
    from transformers import AutoTokenizer

    from nlac_core.backends.embedded import ensure_embedded_model

    if global_batch % processes:
        raise SystemExit(f"--global-batch {global_batch} must be a multiple of --processes {processes}")
    tokenizer = AutoTokenizer.from_pretrained(str(ensure_embedded_model()), local_files_only=True)
    records = examples(tokenizer, max_length, steps * global_batch)
    with tempfile.TemporaryDirectory(prefix="bench-sft-processes-") as tmp:
        one = run_arm(records, 1, steps, global_batch, max_length, bf16, Path(tmp) / "p1")
        many = (run_arm(records, processes, steps, global_batch, max_length, bf16, Path(tmp) / f"p{processes}")
                if processes > 1 else one)
    worst = max(abs(a - b) / abs(a) for a, b in zip(one["losses"], many["losses"], strict=True))
    return {"one": one, "many": many, "worst_rel": worst, "records": len(records),
            "agree": worst <= REL_TOL and one["tokens"] == many["tokens"]}


def report(figures: dict, label: str = "") -> None:
    one, many = figures["one"], figures["many"]
    for arm in (one, many) if many is not one else (one,):
        print(f"{label}sft {arm['processes']} process(es): {arm['tokens_per_s']:.1f} tokens/s "
              f"({arm['tokens']} tokens, {arm['steps']} steps in {arm['runtime_s']:.1f} s; wall with launch "
              f"{arm['wall_s']:.1f} s)")
    if many is one:
        return
    print(f"{label}sft {many['processes']} vs 1 processes: {many['tokens_per_s'] / one['tokens_per_s']:.2f}x tokens/s")
    print(f"{label}sft loss agreement: worst step {figures['worst_rel']:.1e} relative (criterion <= {REL_TOL:g}); "
          f"train_loss {one['train_loss']:.5f} vs {many['train_loss']:.5f}")
    print(f"{label}criterion met: {'yes' if figures['agree'] else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--global-batch", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=384)
    parser.add_argument("--quick", action="store_true", help="2 steps, global batch 2, max length 256")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.global_batch, args.max_length = 2, 2, 256
    started = time.perf_counter()
    figures = compare(args.processes, args.steps, args.global_batch, args.max_length)
    print(f"data: {figures['records']} real tau-bench steps, global batch {args.global_batch}, "
          f"max length {args.max_length}, {args.steps} steps, seed 0")
    report(figures)
    print(f"bench wall time: {time.perf_counter() - started:.0f} s")
    if not math.isfinite(figures["worst_rel"]):
        raise SystemExit("a loss was not finite")


if __name__ == "__main__":
    main()
