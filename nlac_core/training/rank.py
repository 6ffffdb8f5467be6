"""One process of a distributed SFT run: ``accelerate launch -m nlac_core.training.rank REQUEST.json``.

Started by :func:`nlac_core.training.distributed.train`, never by hand. Every rank builds the same Trainer
and fits (the Trainer syncs them); the main rank appends progress events and writes the metrics. A stop
is asked for by the ``stop`` file (or by the caller's death) and agreed on by all ranks at the same step.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from nlac_core.training.config import SFTRunConfig
from nlac_core.training.data import read_records, to_examples
from nlac_core.training.distributed import PARENT_PID_ENV
from nlac_core.training.sft import RunPlan, fit

# a rank whose caller is gone stops at the next step; if it is stuck outside the training loop, it exits
ORPHAN_EXIT_S = 300.0


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    records = read_records(request["records"])
    plan = RunPlan(raw=records, examples=to_examples(records), base=Path(request["base"]), out=Path(request["out"]),
                   run=request["run"], resume_from=request["resume_from"], name=request["name"],
                   kind=request["kind"])
    config = SFTRunConfig.from_dict(request["config"])
    orphaned = _watch_parent()
    stop_file = Path(request["stop"])
    events = Path(request["events"])

    def on_progress(event) -> None:  # called on the main rank only (the callback checks)
        with events.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(event)) + "\n")

    metrics = fit(plan, config, on_progress, should_stop=lambda: _agreed(stop_file.exists() or orphaned.is_set()))
    if int(os.environ.get("RANK", "0")) == 0:
        result = Path(request["result"])
        tmp = result.with_suffix(".part")
        tmp.write_text(json.dumps(metrics), encoding="utf-8")
        tmp.replace(result)
    return 0


def _agreed(local: bool) -> bool:
    """True on every rank when any rank wants to stop (an all-reduce: the ranks leave the loop together)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return local
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([1.0 if local else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _watch_parent() -> threading.Event:
    """Set when the process that launched the run (the worker, the CLI) is gone."""
    orphaned = threading.Event()
    parent = int(os.environ.get(PARENT_PID_ENV, "0"))
    if not parent:
        return orphaned

    def watch() -> None:
        while True:
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                orphaned.set()
                time.sleep(ORPHAN_EXIT_S)
                os._exit(3)
            except PermissionError:  # the pid was reused by another user's process: ours is gone
                orphaned.set()
            time.sleep(2.0)

    threading.Thread(target=watch, name="nlac-parent-watch", daemon=True).start()
    return orphaned


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
