"""The embedded model before training, in our environments: 20 Questions winrate and MATH500 accuracy.

    python bench/bench_envs.py [--words 20] [--trials 1] [--math 50] [--math-tokens 320] [--threads N]

20 Questions: the first ``--words`` words of the list (it interleaves the 17
categories, so 20 words cover all of them), ``--trials`` games each, all games
batched; the embedded model plays both the guesser and the oracle (Yes./No.
by log-likelihood). The guesser samples (temperature 0.7, seed 0; greedy, a
135M model asks the same question twenty times), at most 16 new tokens: a
question is shorter, and every game re-reads its whole prompt each turn, so
prompt length, not generation, is most of the time. MATH500: the first ``--math``
problems of its held-out test half (``nlac_core.envs.math.split_of``; measured before the split: the first of
all 500), greedy, ``--math-tokens`` new tokens at most, answers checked by
math-verify. All 158 words x several trials or all 500 problems take too long
on 2 CPU cores; the sample sizes are printed with the figures.

On a machine whose cores are busy with other work, torch's default of one
thread per core collapses; ``--threads 1`` then gives the honest figure. The
settings line prints the load average to judge by.
"""

from __future__ import annotations

import argparse
import os
import time

from _setup import ROOT  # noqa: F401  (puts the checkout on sys.path)


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=20, help="20 Questions words (0 skips the game)")
    parser.add_argument("--trials", type=int, default=1, help="games per word")
    parser.add_argument("--math", type=int, default=50, help="MATH500 problems (0 skips MATH)")
    parser.add_argument("--math-tokens", type=int, default=320, help="max new tokens of a MATH solution")
    parser.add_argument("--batch-size", type=int, default=32, help="requests per device batch")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()

    import torch

    from nlac_core.backends.base import SamplingSpec
    from nlac_core.backends.embedded import ensure_embedded_model
    from nlac_core.backends.hf import HFBackend
    from nlac_core.envs import make_env
    from nlac_core.evaluation import evaluate

    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    backend = HFBackend(model=str(ensure_embedded_model()), device="cpu", batch_size=args.batch_size)
    print(f"settings: embedded SmolLM2-135M-Instruct on CPU, torch threads {torch.get_num_threads()}, "
          f"batch size {args.batch_size}, load average {os.getloadavg()[0]:.1f} (model loaded in "
          f"{time.perf_counter() - started:.1f} s)")

    if args.words:
        env = make_env("twenty_questions", oracle=backend)
        spec = SamplingSpec(max_new_tokens=16, temperature=0.7, seed=0)
        result = evaluate(env, backend, "all", args.words, args.trials, spec)
        turns = result.mean_turns or 0.0
        print(f"20 Questions: {args.words} words x {args.trials} trial(s) = {result.n_episodes} games, batched; "
              f"guesser temperature 0.7, max 16 new tokens; oracle = the same model by log-likelihood")
        print(f"  winrate {pct(result.success_rate)}  mean reward {result.mean_reward:.2f}  "
              f"mean questions {turns:.1f}  invalid questions {pct(result.invalid_action_rate)}  "
              f"time {result.seconds:.0f} s ({result.seconds / max(1.0, turns):.1f} s per turn of all games)")

    if args.math:
        env = make_env("math")
        spec = SamplingSpec(max_new_tokens=args.math_tokens)
        result = evaluate(env, backend, "test", args.math, 1, spec)
        boxed = sum(1 for t in result.trajectories if t.reward_info and t.reward_info.get("predicted") is not None)
        cut = sum(1 for t in result.trajectories if t.messages[-1].meta.get("finish_reason") == "length")
        print(f"MATH500: first {result.n_episodes} problems, greedy, max {args.math_tokens} new tokens, "
              f"math-verify")
        print(f"  accuracy {pct(result.success_rate)} ({sum(1 for t in result.trajectories if t.reward)} right)  "
              f"boxed answers {boxed}/{result.n_episodes}  cut by the token budget {cut}  "
              f"time {result.seconds:.0f} s")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
