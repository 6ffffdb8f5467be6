"""Futures with content: the successor's FUTURE section on real tau-bench steps, cut at the first line break
(the landed way) against written as one paragraph to the next header with bounded resamples (the default now).

    python bench/bench_futures.py [--steps 50] [--max-state-chars 1500] [--tokens 64]

The same 50 steps as bench_critique.py (one step of each of the first 50 trajectories of the gpt-4o airline
run, at varying depths), the embedded model, greedy. Prints, per way, how many futures are empty or
primer-only ("After this action, the agent will:"), how many were resampled, and the seconds taken.
Success criterion, fixed before the run: 0 of 50 degenerate futures stored as a finished critique (a future
still degenerate after the resamples is flagged, and counted here).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_critique import spread_steps  # noqa: E402
from nlac_core.backends.embedded import ensure_embedded_model  # noqa: E402
from nlac_core.backends.hf import HFBackend  # noqa: E402
from nlac_core.critic import CritiqueConfig  # noqa: E402
from nlac_core.sections import continue_line, continue_paragraph, is_degenerate  # noqa: E402
from nlac_core.successor import FUTURE_PRIMER, successor_requests, transition_of  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--max-state-chars", type=int, default=1500)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()

    steps = spread_steps(args.steps)
    backend = HFBackend(model=str(ensure_embedded_model()))
    requests, _ = successor_requests([transition_of(s, None, args.max_state_chars) for s in steps])
    spec = CritiqueConfig().spec(args.tokens)
    print(f"{len(steps)} real tau-bench steps, model {backend.model}, {args.tokens} tokens, greedy")

    start = time.perf_counter()
    lines = continue_line(backend, requests, "FUTURE", spec, primer=FUTURE_PRIMER)
    seconds = time.perf_counter() - start
    bad = sum(is_degenerate(line, FUTURE_PRIMER) for line in lines)
    print(f"one line (landed):     {bad}/{len(lines)} empty or primer-only, {seconds:.0f} s")

    start = time.perf_counter()
    paragraphs = continue_paragraph(backend, requests, "FUTURE", spec, primer=FUTURE_PRIMER)
    seconds = time.perf_counter() - start
    bad = sum(p.degenerate for p in paragraphs)
    resampled = sum(p.attempts > 1 for p in paragraphs)
    mean_words = sum(len(p.text.split()) for p in paragraphs) / len(paragraphs)
    print(f"paragraph (default):   {bad}/{len(paragraphs)} degenerate after resampling (flagged, never a finished "
          f"critique); {resampled} resampled; mean {mean_words:.0f} words; {seconds:.0f} s")
    print(f"criterion 0 of {len(paragraphs)} degenerate: {'met' if bad == 0 else 'NOT met'}")
    for p in paragraphs[:3]:
        print(f"  e.g. {p.text[:150]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
