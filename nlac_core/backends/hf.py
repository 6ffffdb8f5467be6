"""transformers backend: any local causal-LM directory, on CPU or one GPU.

The algorithm calls this backend with many short requests (one section of a
critique at a time, ``stop=("\\n",)``) and scores 2-3 allowed values of a field
by log-likelihood. So the batched paths are the ones that matter:

- ``generate`` sorts requests by prompt length (little padding), left-pads each
  device batch and stops the batch as soon as every row has hit EOS or a stop
  string, instead of running to ``max_new_tokens``.
- sampling draws each row with its own ``torch.Generator`` seeded from the call
  (``seed + i`` for request ``i``), so a request samples the same text whether
  it is generated alone or in a batch, and whatever else is in the batch. That
  is what lets the HTTP server (:mod:`nlac_core.serve`) batch requests that
  carry different seeds (``generate(..., row_seeds=...)``).
- ``loglikelihood`` runs each distinct prompt once, then scores every
  continuation of it against the prompt's KV cache: the options of a choice
  share their (long) prompt instead of recomputing it.

torch and transformers are imported here only, never by ``nlac_core.backends``.
"""

from __future__ import annotations

import gc
import logging
import random
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LogitsProcessor, StoppingCriteria

from nlac_core.backends import templating
from nlac_core.backends.base import (
    BackendError,
    ChatRequest,
    Completion,
    SamplingSpec,
    ScoreRequest,
    as_requests,
    truncate_at_stop,
)

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class _RowSampler(LogitsProcessor):
    """Temperature + top-p sampling with one generator per row.

    transformers' own sampling draws the whole batch from one RNG, so a row's
    text would depend on its batch mates. Here each row draws from its own
    generator and the chosen token is handed back as the only finite score,
    which greedy decoding then picks.
    """

    def __init__(self, temperature: float, top_p: float, generators: list[torch.Generator]) -> None:
        self.temperature = temperature
        self.top_p = top_p
        self.generators = generators

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        logits = scores.float() / self.temperature
        if self.top_p < 1.0:
            ordered, order = torch.sort(logits, dim=-1, descending=True)
            cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
            drop = cumulative > self.top_p
            drop[..., 1:] = drop[..., :-1].clone()  # keep the token that crosses top_p
            drop[..., 0] = False
            logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
        probs = logits.softmax(dim=-1)
        chosen = torch.stack([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)])
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, chosen, 0.0)


class _StopWatch(StoppingCriteria):
    """Marks a row finished at EOS or once its new text contains a stop string; remembers where.

    Only the tail of each unfinished row is decoded at each step (a stop string
    of n characters spans at most ~4n byte-level tokens), so the check stays cheap.
    """

    def __init__(self, tokenizer, prompt_len: int, stop: Sequence[str], eos_ids: set[int], rows: int) -> None:
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.stop = [s for s in stop if s]
        self.window = 4 * max((len(s) for s in self.stop), default=0) + 4
        self.eos_ids = eos_ids
        self.done = torch.zeros(rows, dtype=torch.bool)
        self.lengths: list[int | None] = [None] * rows

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        new_len = input_ids.shape[1] - self.prompt_len
        last = input_ids[:, -1].tolist()
        for row in range(input_ids.shape[0]):
            if self.done[row]:
                continue
            if last[row] in self.eos_ids:
                self.done[row], self.lengths[row] = True, new_len
            elif self.stop:
                start = max(self.prompt_len, input_ids.shape[1] - self.window)
                tail = self.tokenizer.decode(input_ids[row, start:], skip_special_tokens=True)
                if any(s in tail for s in self.stop):
                    self.done[row], self.lengths[row] = True, new_len
        return self.done.to(input_ids.device)


class HFBackend:
    """A local transformers model.

    ``max_length`` caps prompt + completion tokens (default: the model's context
    length); longer prompts lose their beginning, with one warning. Not
    thread-safe: one caller at a time (the HTTP server funnels requests
    through one model thread).
    """

    name = "hf"

    def __init__(self, model: str, device: str | None = None, dtype: str | None = None, batch_size: int = 16,
                 max_length: int | None = None) -> None:
        path = Path(model)
        if not (path / "config.json").is_file():
            raise BackendError(f"{model}: not a model directory (no config.json); models load from local paths only")
        if batch_size < 1:
            raise BackendError(f"batch_size must be at least 1, got {batch_size}")
        self.model = str(model)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if dtype in (None, "auto"):
            torch_dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        elif dtype in DTYPES:
            torch_dtype = DTYPES[dtype]
        else:
            raise BackendError(f"dtype {dtype!r}: expected one of {', '.join(sorted(DTYPES))} or auto")
        self.batch_size = batch_size
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.model, local_files_only=True)
            self.hf_model = AutoModelForCausalLM.from_pretrained(self.model, local_files_only=True, dtype=torch_dtype)
        except (OSError, ValueError) as exc:
            raise BackendError(f"{model}: cannot load the model ({exc})") from exc
        if not getattr(self.tokenizer, "chat_template", None):
            raise BackendError(f"{model}: the tokenizer has no chat template, so chat requests cannot be rendered")
        try:
            self.hf_model.to(self.device).eval()
        except (RuntimeError, AssertionError) as exc:  # torch says "not compiled with CUDA" with an AssertionError
            raise BackendError(f"{model}: cannot place the model on {self.device} ({exc})") from exc
        self.eos_ids = self._eos_ids()
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.max_length = max_length or self._context_length()
        self._warned_truncation = False
        self.truncated_prompts = 0

    # ----------------------------------------------------------------- setup

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for value in (getattr(self.hf_model.generation_config, "eos_token_id", None), self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(value)
        if not ids:
            raise BackendError(f"{self.model}: neither the tokenizer nor the generation config names an EOS token")
        return ids

    def _context_length(self) -> int:
        candidates = [getattr(self.hf_model.config, "max_position_embeddings", None),
                      getattr(self.tokenizer, "model_max_length", None)]
        sane = [int(c) for c in candidates if isinstance(c, int) and 0 < c < 10_000_000]
        return min(sane) if sane else 4096

    def close(self) -> None:
        """Drop the weights (and the CUDA cache) so a worker can load another checkpoint."""
        self.hf_model = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ------------------------------------------------------------- rendering

    def prompt_ids(self, request: ChatRequest | ScoreRequest) -> list[int]:
        """Token ids of the chat-template prompt, assistant prefix included."""
        return templating.prompt_ids(self.tokenizer, request)

    def _fit(self, ids: list[int], budget: int) -> list[int]:
        """A prompt that does not fit loses its middle: the first quarter of the budget keeps the system
        text and examples (the instructions), the rest keeps the end (the latest turns and the request).
        Callers clip states to a character budget first; this is the last resort, counted in
        ``truncated_prompts`` and warned about once."""
        if len(ids) <= budget:
            return ids
        self.truncated_prompts += 1
        head = budget // 4
        if not self._warned_truncation:
            log.warning("%s: a prompt of %d tokens exceeds the %d-token budget; keeping its first %d and last %d "
                        "tokens (warned once; see truncated_prompts)", self.model, len(ids), budget, head,
                        budget - head)
            self._warned_truncation = True
        return ids[:head] + ids[len(ids) - (budget - head):]

    # ------------------------------------------------------------ generation

    def generate(self, requests, spec: SamplingSpec, *, row_seeds: Sequence[int | None] | None = None
                 ) -> list[Completion]:
        """One completion per request, in order.

        Sampled rows use seed ``spec.seed + i`` for request ``i`` (a random base
        when ``spec.seed`` is None); ``row_seeds`` overrides the seed per row.
        """
        requests = as_requests(requests)
        if not requests:
            return []
        if self.hf_model is None:
            raise BackendError(f"{self.model}: the backend was closed")
        if row_seeds is not None and len(row_seeds) != len(requests):
            raise BackendError(f"row_seeds has {len(row_seeds)} seeds for {len(requests)} requests")
        base = spec.seed if spec.seed is not None else random.SystemRandom().randrange(2**62)
        seeds = [base + i if row_seeds is None or row_seeds[i] is None else row_seeds[i]
                 for i in range(len(requests))]
        budget = max(1, self.max_length - spec.max_new_tokens)
        prompts = [self._fit(self.prompt_ids(r), budget) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: len(prompts[i]))
        results: list[Completion | None] = [None] * len(requests)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            batch = self._generate_batch([prompts[i] for i in rows], spec, [seeds[i] for i in rows])
            for i, completion in zip(rows, batch, strict=True):
                results[i] = completion
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[list[int]], spec: SamplingSpec, seeds: list[int]) -> list[Completion]:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids):] = 1
        watch = _StopWatch(self.tokenizer, width, spec.stop, self.eos_ids, len(prompts))
        processors = []
        if not spec.greedy:
            generators = [torch.Generator(device=self.device).manual_seed(s & 0xFFFF_FFFF_FFFF_FFFF) for s in seeds]
            processors.append(_RowSampler(spec.temperature, spec.top_p, generators))
        config = GenerationConfig(max_new_tokens=spec.max_new_tokens, do_sample=False, num_beams=1,
                                  pad_token_id=self.pad_id, eos_token_id=sorted(self.eos_ids),
                                  temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            output = self.hf_model.generate(input_ids=input_ids.to(self.device),
                                            attention_mask=attention.to(self.device), generation_config=config,
                                            logits_processor=processors, stopping_criteria=[watch])
        new_tokens = output[:, width:].tolist()
        out = []
        for row, ids in enumerate(prompts):
            length = watch.lengths[row] if watch.lengths[row] is not None else len(new_tokens[row])
            tokens = new_tokens[row][:length]
            ended_at_eos = bool(tokens) and tokens[-1] in self.eos_ids
            text, stopped = truncate_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True), spec.stop)
            out.append(Completion(text=text, prompt_tokens=len(ids), completion_tokens=len(tokens),
                                  finish_reason="stop" if stopped or ended_at_eos else "length"))
        return out

    # --------------------------------------------------------- log-likelihood

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[float]:
        """Sum of log p(continuation tokens | prompt + assistant prefix), one float per request.

        The continuation is tokenized on its own and appended to the prompt's
        tokens, as generation would produce it after that prompt.
        """
        if not requests:
            return []
        if self.hf_model is None:
            raise BackendError(f"{self.model}: the backend was closed")
        prompt_of: dict[tuple[int, ...], list[int]] = {}  # prompt ids -> indices of the requests using it
        continuations: list[list[int]] = []
        for i, request in enumerate(requests):
            cont = self.tokenizer.encode(request.continuation, add_special_tokens=False)
            if len(cont) >= self.max_length:
                raise BackendError(f"score request {i}: the continuation alone has {len(cont)} tokens, more than "
                                   f"the {self.max_length}-token context of {self.model}")
            prompt = self._fit(self.prompt_ids(request), self.max_length - max(len(cont), 1))
            prompt_of.setdefault(tuple(prompt), []).append(i)
            continuations.append(cont)
        scores = [0.0] * len(requests)
        groups = sorted(prompt_of.items(), key=lambda item: len(item[0]))
        batch: list[tuple[tuple[int, ...], list[int]]] = []
        for group in groups:
            if batch and sum(len(users) for _, users in batch) + len(group[1]) > self.batch_size:
                self._score_batch(batch, continuations, scores)
                batch = []
            batch.append(group)
        if batch:
            self._score_batch(batch, continuations, scores)
        return scores

    def _score_batch(self, groups, continuations: list[list[int]], scores: list[float]) -> None:
        """Score every continuation of a few distinct prompts: each prompt is run once.

        Prompts are left-padded and run with the KV cache kept; the cache rows
        are then repeated for each continuation of a prompt and the
        continuations (right-padded) are run against it. Only the logits that
        score a token are ever materialised.
        """
        device = self.device
        width = max(len(prompt) for prompt, _ in groups)
        prompt_ids = torch.full((len(groups), width), self.pad_id, dtype=torch.long)
        prompt_mask = torch.zeros((len(groups), width), dtype=torch.long)
        for g, (prompt, _) in enumerate(groups):
            prompt_ids[g, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            prompt_mask[g, width - len(prompt):] = 1
        positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        rows = [(g, i) for g, (_, users) in enumerate(groups) for i in users if continuations[i]]
        if not rows:
            return
        with torch.inference_mode():
            out = self.hf_model(input_ids=prompt_ids.to(device), attention_mask=prompt_mask.to(device),
                              position_ids=positions.to(device), use_cache=True, logits_to_keep=1)
            row_group = torch.tensor([g for g, _ in rows], dtype=torch.long, device=device)
            first = out.logits[:, -1, :].float().log_softmax(-1).index_select(0, row_group)  # [rows, vocab]
            conts = [continuations[i] for _, i in rows]
            first_ids = torch.tensor([c[0] for c in conts], dtype=torch.long, device=device)
            totals = first.gather(1, first_ids[:, None]).squeeze(1)
            rest = max(len(c) for c in conts) - 1
            if rest > 0:
                totals = totals + self._score_rest(out.past_key_values, row_group, prompt_mask.to(device), conts, rest)
        for (_, i), value in zip(rows, totals.tolist(), strict=True):
            scores[i] = float(value)

    def _score_rest(self, cache, row_group, prompt_mask, conts: list[list[int]], rest: int):
        """Log-probs of continuation tokens 2..n: feed tokens 1..n-1 after the shared prompt cache."""
        device = self.device
        cache.batch_select_indices(row_group)
        feed = torch.full((len(conts), rest), self.pad_id, dtype=torch.long)
        target = torch.full((len(conts), rest), self.pad_id, dtype=torch.long)
        valid = torch.zeros((len(conts), rest), dtype=torch.bool)
        for r, cont in enumerate(conts):
            n = len(cont) - 1
            if n:
                feed[r, :n] = torch.tensor(cont[:-1], dtype=torch.long)
                target[r, :n] = torch.tensor(cont[1:], dtype=torch.long)
                valid[r, :n] = True
        mask = torch.cat([prompt_mask.index_select(0, row_group), torch.ones_like(feed, device=device)], dim=1)
        start = prompt_mask.sum(-1).index_select(0, row_group)
        positions = start[:, None] + torch.arange(rest, device=device)[None, :]
        out = self.hf_model(input_ids=feed.to(device), attention_mask=mask, position_ids=positions,
                          past_key_values=cache, use_cache=True)
        logprobs = out.logits.float().log_softmax(-1).gather(2, target.to(device)[:, :, None]).squeeze(2)
        return (logprobs * valid.to(device)).sum(-1)
