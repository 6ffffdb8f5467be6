"""Critique parse rate of the embedded model on real tau-bench steps, by mode.

    python bench/bench_critique.py [--steps 50] [--max-state-chars 1500] [--save-fixtures PATH]

For each of 50 real steps of the gpt-4o tau-bench airline run (one step of each
of 50 trajectories, spread over the episode), the successor writes one future
(shared by all modes, so only the evaluator differs) and the evaluator writes a
critique four ways: free zero-shot, free with a worked example, and section by
section with categorical values chosen by likelihood, with the verdict's
likelihoods calibrated against a content-free prompt (the default) and raw.
Prints, per mode, the share of critiques with all five fields valid, which
fields were missing, the verdict distribution (overall, and on steps of episodes
that ended with reward 1 vs reward 0) and the seconds taken. ``--save-fixtures``
keeps the free outputs as JSONL for the parser's tests.

    python bench/bench_critique.py --modes sectioned,sectioned_raw   # only the sectioned variants
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nlac_core.backends.embedded import ensure_embedded_model  # noqa: E402
from nlac_core.backends.hf import HFBackend  # noqa: E402
from nlac_core.critic import CritiqueConfig, critique  # noqa: E402
from nlac_core.formats import read  # noqa: E402
from nlac_core.prompts.nlac import SUCCESSOR  # noqa: E402
from nlac_core.state import steps_of  # noqa: E402
from nlac_core.successor import predict_futures, transition_of  # noqa: E402

TAU = ROOT.parent / "shared" / "data" / "tau-bench" / "gpt-4o-airline.json"
MODES = ("free_zero_shot", "free", "sectioned", "sectioned_raw")


def spread_steps(n: int):
    """One step from each of the first n trajectories, at varying depths."""
    out = []
    for i, item in enumerate(itertools.islice(read(TAU), n)):
        steps = steps_of(item.record)
        if steps:
            out.append(steps[(i * 7) % len(steps)])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--max-state-chars", type=int, default=1500)
    parser.add_argument("--save-fixtures", default=None)
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; known: {', '.join(MODES)}")

    steps = spread_steps(args.steps)
    backend = HFBackend(model=str(ensure_embedded_model()))
    transitions = [transition_of(s, None, args.max_state_chars) for s in steps]
    prompt_tokens = [len(backend.prompt_ids(SUCCESSOR.render(state=t.state, action=t.action).request()))
                     for t in transitions]
    print(f"{len(steps)} real tau-bench steps, states cut to {args.max_state_chars} characters "
          f"(successor prompt: mean {sum(prompt_tokens) / len(prompt_tokens):.0f} tokens), model {backend.model}")

    start = time.perf_counter()
    futures = predict_futures(backend, transitions, CritiqueConfig().spec(64))
    print(f"successor futures: {time.perf_counter() - start:.0f} s; "
          f"{sum(bool(f[0].text) for f in futures)}/{len(futures)} non-empty, "
          f"{sum(f[0].degenerate for f in futures)}/{len(futures)} degenerate (empty or primer-only after "
          "the bounded resamples)")

    saved = []
    print(f"\n{'mode':<16}{'parsed':>10}{'rate':>8}{'seconds':>9}  missing fields / verdicts")
    won = [bool(s.trajectory.reward and s.trajectory.reward >= 1) for s in steps]
    print(f"steps of episodes with reward 1: {sum(won)}, with reward 0: {len(won) - sum(won)}")
    for mode in modes:
        start = time.perf_counter()
        config = (CritiqueConfig(mode="sectioned", calibrate_verdicts=False) if mode == "sectioned_raw"
                  else CritiqueConfig(mode=mode))
        critiques = critique(backend, transitions, config, futures=futures)
        seconds = time.perf_counter() - start
        ok = sum(c.parse_ok for c in critiques)
        missing = collections.Counter(m for c in critiques for m in c.missing)
        verdicts = collections.Counter(c.verdict or "none" for c in critiques)
        print(f"{mode:<16}{ok:>6}/{len(critiques):<3}{ok / len(critiques):>8.0%}{seconds:>9.0f}  "
              f"missing {dict(missing) or '-'}; verdicts {dict(verdicts)}")
        for label, flag in (("reward 1", True), ("reward 0", False)):
            split = collections.Counter(c.verdict or "none" for c, w in zip(critiques, won, strict=True) if w == flag)
            print(f"{'':<42}on {label} steps: {dict(split)}")
        if mode.startswith("free"):
            saved.extend({"mode": mode, "raw_text": c.raw_text, "expected_missing": list(c.missing)}
                         for c in critiques)
    if args.save_fixtures:
        path = Path(args.save_fixtures)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in saved))
        print(f"\nsaved {len(saved)} free-mode outputs to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
