"""Environments the policy acts in: 20 Questions, MATH500 and tool use (tau2 mock domain).

    env = make_env("twenty_questions", oracle=backend)
    trajectories = rollout(env, policy_backend, env.tasks("test", limit=20), trials=2, spec=spec)

Each environment module is imported on first use only. ``make_env`` takes the
environment's own keyword arguments (data paths, caps); ``oracle`` is the LLM
the environment itself needs (the 20 Questions oracle, the tool-use simulated
user) and is ignored by MATH.
"""

from __future__ import annotations

import importlib
from typing import Any

from nlac_core.envs.base import EnvError, Environment, LLMQuery, StepResult, drive

# name -> ("module:Class", keyword that receives the environment's own LLM, or None)
REGISTRY: dict[str, tuple[str, str | None]] = {
    "twenty_questions": ("nlac_core.envs.twenty_questions:TwentyQuestionsEnv", "oracle"),
    "math": ("nlac_core.envs.math:MathEnv", None),
    "tool_use": ("nlac_core.envs.tool_use:ToolUseEnv", "user"),
}
ENV_NAMES = tuple(REGISTRY)

# Held-out splits: what training and iteration draw on by default, and what evaluation scores on.
TRAIN_SPLITS = {"twenty_questions": "train", "math": "train", "tool_use": "synthetic_train"}
EVAL_SPLITS = {"twenty_questions": "test", "math": "test", "tool_use": "synthetic_test"}
# Which disjoint parts each named split covers, to tell whether two splits share tasks without loading them.
_PARTS = {
    "twenty_questions": {"train": {"train"}, "test": {"test"}, "all": {"train", "test"}},
    "math": {"train": {"train"}, "test": {"test"}, "all": {"train", "test"}},
    "tool_use": {"graded": {"base"}, "base": {"base"}, "all": {"base", "other"}, "synthetic": {"s1", "s2"},
                 "synthetic_train": {"s1"}, "synthetic_test": {"s2"}},
}


def overlapping(env: str, a: str, b: str) -> bool:
    """Whether splits ``a`` and ``b`` of ``env`` share tasks ("" is the split's default: train for a, evaluation
    for b). Unknown names are the environment's to refuse when it loads its tasks."""
    parts = _PARTS.get(env, {})
    a, b = a or TRAIN_SPLITS.get(env, ""), b or EVAL_SPLITS.get(env, "")
    return a == b or bool(parts.get(a, set()) & parts.get(b, set()))


def needs_oracle(name: str) -> bool:
    return _entry(name)[1] is not None


def _entry(name: str) -> tuple[str, str | None]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise EnvError(f"unknown environment {name!r}; known: {', '.join(ENV_NAMES)}") from None


def make_env(name: str, oracle=None, **kwargs: Any) -> Environment:
    """Build environment ``name``; ``oracle`` is its own LLM backend where it needs one."""
    target, llm_arg = _entry(name)
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if llm_arg is not None:
        if oracle is None:
            raise EnvError(f"environment {name!r} needs an LLM backend for its {llm_arg} (pass oracle=...)")
        kwargs[llm_arg] = oracle
    return cls(**kwargs)


__all__ = ["ENV_NAMES", "EVAL_SPLITS", "REGISTRY", "TRAIN_SPLITS", "EnvError", "Environment", "LLMQuery",
           "StepResult", "drive", "make_env", "needs_oracle", "overlapping"]
