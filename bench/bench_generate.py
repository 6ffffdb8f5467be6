"""CPU generation throughput of the embedded model: 16 requests in one batched call vs 16 single calls.

    python bench/bench_generate.py [--requests 16] [--max-new-tokens 64] [--threads N]
    python bench/bench_generate.py --device cuda --dtype bfloat16 [--model DIR]   # on a GPU host

Same prompts, greedy, both ways; throughput is completion tokens (up to EOS)
per second of wall time. Batching is the default path of every backend, so the
batched figure is the one the algorithm sees; the issue asks for >= 3x.

On a machine whose cores are busy with other work, torch's default of one
thread per core collapses (threads wait on each other); ``--threads 1`` then
gives the honest figure. The settings line prints the load average to judge by.
"""

from __future__ import annotations

import argparse
import os
import time

from _setup import ROOT  # noqa: F401  (puts the checkout on sys.path)

QUESTIONS = [
    "What is the capital of France?",
    "How many legs does a spider have?",
    "Give one tip for staying focused while studying.",
    "What does a thermometer measure?",
    "Name a fruit that is yellow.",
    "Why do we need sleep?",
    "What is 12 times 11?",
    "Which planet is known as the red planet?",
    "How do I boil an egg?",
    "What language is spoken in Brazil?",
    "What is photosynthesis, in one sentence?",
    "Suggest a name for a pet goldfish.",
    "What is the opposite of 'ancient'?",
    "How many days are there in a leap year?",
    "What should I pack for a day at the beach?",
    "Who wrote Romeo and Juliet?",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--dtype", default="auto", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16")
    parser.add_argument("--model", default=None, help="model directory (default: the embedded model)")
    args = parser.parse_args()

    import torch

    from nlac_core.backends.base import SamplingSpec
    from nlac_core.backends.embedded import ensure_embedded_model
    from nlac_core.backends.hf import HFBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    backend = HFBackend(model=args.model or str(ensure_embedded_model()), device=args.device, dtype=args.dtype,
                        batch_size=args.requests)
    requests = [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(args.requests)]
    spec = SamplingSpec(max_new_tokens=args.max_new_tokens)
    backend.generate(requests[:2], SamplingSpec(max_new_tokens=4))  # warm-up: first-call allocations

    start = time.perf_counter()
    batched = backend.generate(requests, spec)
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    single = [backend.generate([r], spec)[0] for r in requests]
    single_s = time.perf_counter() - start

    batched_tokens = sum(c.completion_tokens for c in batched)
    single_tokens = sum(c.completion_tokens for c in single)
    same = sum(b.text == s.text for b, s in zip(batched, single, strict=True))
    batched_rate, single_rate = batched_tokens / batched_s, single_tokens / single_s
    print(f"settings: {backend.model}, {backend.device}, {str(backend.hf_model.dtype).removeprefix('torch.')}, "
          f"torch threads {torch.get_num_threads()} of {os.cpu_count()} "
          f"cores (load average {os.getloadavg()[0]:.1f}), {args.requests} requests, "
          f"max_new_tokens {args.max_new_tokens}, greedy")
    print(f"batched (1 call):   {batched_tokens} tokens in {batched_s:.2f} s = {batched_rate:.1f} tokens/s")
    print(f"one at a time ({args.requests} calls): {single_tokens} tokens in {single_s:.2f} s = "
          f"{single_rate:.1f} tokens/s")
    print(f"speedup: {batched_rate / single_rate:.2f}x  (identical texts: {same}/{args.requests})")


if __name__ == "__main__":
    main()
