"""CPU and GPU hosts run the same libraries but torch: both requirement files pin the shared set through
requirements-common.txt, and nothing else but torch (and vLLM, GPU only) is pinned beside it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+)$")


def pins(name: str, seen: set[str] | None = None) -> dict[str, str]:
    """{package: version} of a requirements file, following its ``-r`` includes."""
    out: dict[str, str] = {}
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            out.update(pins(line[3:].strip()))
            continue
        match = PIN.match(line)
        assert match, f"{name}: {raw!r} is not an exact pin"
        package = match.group(1).lower().split("[")[0]
        assert package not in out, f"{name}: {package} pinned twice"
        out[package] = match.group(2)
    return out


def test_it_pins_the_same_libraries_on_cpu_and_gpu_hosts_but_torch():
    cpu, gpu = pins("requirements.txt"), pins("requirements-gpu.txt")
    assert set(gpu) - set(cpu) == {"vllm"}
    assert set(cpu) == set(gpu) - {"vllm"}
    differ = {p for p in cpu if cpu[p] != gpu[p]}
    assert differ <= {"torch"}, f"pinned differently on CPU and GPU hosts: {sorted(differ)}"
    for shared in ("transformers", "trl", "peft", "accelerate", "datasets", "numpy"):
        assert shared in pins("requirements-common.txt"), f"{shared} is not in the shared pins"
