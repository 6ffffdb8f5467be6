"""What several subcommands share: the backend options, JSONL in and out, progress bars."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from nlac_core.backends import get_backend
from nlac_core.backends.base import SamplingSpec
from nlac_core.backends.embedded import ensure_embedded_model


class UsageError(ValueError):
    """A bad argument or input file; the CLI prints it and exits 2."""


def add_backend_args(parser, prefix: str = "", what: str = "model") -> None:
    """``--backend``, ``--model`` and friends; ``prefix`` names a second backend (``oracle-``)."""
    dest = prefix.replace("-", "_")
    parser.add_argument(f"--{prefix}backend", dest=f"{dest}backend", default="hf",
                        choices=("hf", "vllm", "openai"), help=f"backend of the {what} (default hf)")
    parser.add_argument(f"--{prefix}model", dest=f"{dest}model", default=None,
                        help=f"{what}: a local model directory (default: the embedded SmolLM2), "
                             "or the model id at an OpenAI-compatible endpoint")
    parser.add_argument(f"--{prefix}base-url", dest=f"{dest}base_url", default=None,
                        help="OpenAI-compatible endpoint (openai backend), e.g. http://127.0.0.1:8001/v1")
    parser.add_argument(f"--{prefix}device", dest=f"{dest}device", default=None,
                        help="torch device for hf (default: cuda when available, else cpu)")


def add_sampling_args(parser, max_new_tokens: int = 128, temperature: float = 0.0) -> None:
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--temperature", type=float, default=temperature, help="0 is greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16, help="requests per generation call")


def sampling_from_args(args, **overrides) -> SamplingSpec:
    try:
        return SamplingSpec(max_new_tokens=overrides.get("max_new_tokens", args.max_new_tokens),
                            temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def backend_from_args(args, prefix: str = ""):
    """Build the backend the options name; the embedded model when no --model is given."""
    dest = prefix.replace("-", "_")
    name, model = getattr(args, f"{dest}backend"), getattr(args, f"{dest}model")
    base_url, device = getattr(args, f"{dest}base_url"), getattr(args, f"{dest}device")
    if name == "openai":
        if not model:
            raise UsageError(f"--{prefix}model is required with the openai backend (the model id at the endpoint)")
        return get_backend("openai", model=model, base_url=base_url or os.environ.get("OPENAI_BASE_URL"))
    if model is None:
        model = str(ensure_embedded_model())
    elif not Path(model).is_dir():
        raise UsageError(f"--{prefix}model {model}: not a model directory (models load from local paths only)")
    kwargs: dict[str, Any] = {"model": model}
    if name == "hf" and device:
        kwargs["device"] = device
    return get_backend(name, **kwargs)


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line; a bad line is a UsageError naming it."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path.name}, line {number}: not valid JSON ({exc.msg})") from None
            if not isinstance(value, dict):
                raise UsageError(f"{path.name}, line {number}: expected a JSON object")
            yield number, value


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows to ``path`` (``-`` for stdout) through a temporary file; returns the count."""
    if str(path) == "-":
        n = 0
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
        return n
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    n = 0
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failure half-way leaves no partial file behind
        raise
    tmp.replace(path)
    return n


def progress(iterable=None, total: int | None = None, desc: str = ""):
    """A tqdm bar on stderr (quiet when stderr is not a terminal and NLAC_PROGRESS is unset)."""
    disable = not (sys.stderr.isatty() or os.environ.get("NLAC_PROGRESS"))
    return tqdm(iterable, total=total, desc=desc, disable=disable, file=sys.stderr)
