"""``python -m nlac_core``: the core without the web app.

    detect, stats, convert          benchmark files (no model)
    convert-model, generate, serve  models and backends
    critique, backup, refine        the NLAC steps over trajectory JSONL
    calibrate-outcome               P(success) fitted to real outcomes, with AUROC and reliability
    evaluate-critic                 a runtime critic against labels: AUROC, balanced accuracy, baselines
    build-dataset, train            SFT datasets and training
    rollout, evaluate               environments (20 Questions, MATH, tool use)
    first-errors, judge             the runtime critic: labels from gold actions, offline checks

``python -m nlac_core COMMAND --help`` for each. Exit status 2 with the place
of the problem on stderr for a bad argument or file.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from nlac_core.backends.base import BackendError
from nlac_core.commands.common import UsageError
from nlac_core.formats import FormatError

COMMAND_MODULES = (
    "nlac_core.commands.formats",
    "nlac_core.commands.models",
    "nlac_core.commands.algorithm",
    "nlac_core.commands.training",
    "nlac_core.commands.envs",
    "nlac_core.commands.supervision",
    "nlac_core.commands.outcome",
    "nlac_core.commands.critic_eval",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nlac_core", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FormatError, UsageError, BackendError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
