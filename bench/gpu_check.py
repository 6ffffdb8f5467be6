"""The GPU check, from a clean checkout with one command; one figure (or one skip, with its reason) per line.

    python bench/gpu_check.py [--requests 64] [--max-new-tokens 128] [--model DIR]

On CUDA: hf vs vllm generation throughput on the same prompts (greedy, completion tokens per second of wall
time, and the ratio), bf16 on the GPU; bf16 SFT tokens/s on 1 GPU and on all of them (accelerate launch, DDP,
``bench_sft_processes.compare``: the same data, seed and global batch, with the loss agreement). On a machine
without CUDA (or without vllm) it says what it skipped and why, and exits 0. The sharded critique job end to
end has its own bench, ``bench/bench_shards.py`` (one worker per GPU: run it with the workers'
``CUDA_VISIBLE_DEVICES`` set).
"""

from __future__ import annotations

import argparse
import importlib.util
import time

from _setup import ROOT  # noqa: F401  (puts the checkout on sys.path)
from bench_generate import QUESTIONS
from bench_sft_processes import compare, report


def _rate(backend, requests, spec) -> tuple[float, int, float]:
    start = time.perf_counter()
    out = backend.generate(requests, spec)
    seconds = time.perf_counter() - start
    tokens = sum(c.completion_tokens for c in out)
    return tokens / seconds, tokens, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--model", default=None, help="model directory (default: the embedded model)")
    args = parser.parse_args()

    import torch

    from nlac_core.backends import get_backend
    from nlac_core.backends.base import SamplingSpec
    from nlac_core.backends.embedded import ensure_embedded_model

    cuda = torch.cuda.is_available()
    print(f"device: {torch.cuda.get_device_name(0) if cuda else 'no CUDA GPU'}"
          + (f" x {torch.cuda.device_count()}" if cuda else "") + f", torch {torch.__version__}")
    print("skipped: sharded critique end to end: run bench/bench_shards.py with one worker per GPU")
    if not cuda:
        print("skipped: hf vs vllm generation throughput: no CUDA GPU here")
        print("skipped: bf16 SFT on 1 and on all GPUs: no CUDA GPU here (bench/bench_sft_processes.py measures "
              "1 vs 2 processes on CPU)")
        return
    gpus = torch.cuda.device_count()
    report(compare(gpus, steps=8, global_batch=4 * gpus, max_length=512, bf16=True), label="bf16 ")
    if gpus == 1:
        print("skipped: bf16 SFT on all GPUs: this host has one GPU")
    if importlib.util.find_spec("vllm") is None:
        print("skipped: hf vs vllm generation throughput: vllm is not installed "
              "(pip install -r requirements-gpu.txt)")
        return
    model = args.model or str(ensure_embedded_model())
    requests = [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(args.requests)]
    spec = SamplingSpec(max_new_tokens=args.max_new_tokens)
    hf = get_backend("hf", model=model, device="cuda", dtype="bfloat16", batch_size=args.requests)
    hf.generate(requests[:2], SamplingSpec(max_new_tokens=4))  # warm-up
    hf_rate, hf_tokens, hf_s = _rate(hf, requests, spec)
    print(f"hf generation: {hf_rate:.0f} tokens/s ({hf_tokens} tokens in {hf_s:.2f} s, {args.requests} requests)")
    del hf
    torch.cuda.empty_cache()
    vllm = get_backend("vllm", model=model, dtype="bfloat16")
    vllm.generate(requests[:2], SamplingSpec(max_new_tokens=4))
    vllm_rate, vllm_tokens, vllm_s = _rate(vllm, requests, spec)
    print(f"vllm generation: {vllm_rate:.0f} tokens/s ({vllm_tokens} tokens in {vllm_s:.2f} s)")
    print(f"vllm/hf generation ratio: {vllm_rate / hf_rate:.2f}x")
    vllm.close()


if __name__ == "__main__":
    main()
