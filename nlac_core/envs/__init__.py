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


__all__ = ["ENV_NAMES", "REGISTRY", "EnvError", "Environment", "LLMQuery", "StepResult", "drive", "make_env",
           "needs_oracle"]
