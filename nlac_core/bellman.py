"""The language Bellman backup: SFT targets for the successor model M(s_t, a_t).

For a transition (s_t, a_t, r_t, s_t+1):
1. a_t+1 ~ pi(s_t+1): the policy writes the next action (or, off-policy, the
   recorded next action is used: ``next_action="data"``);
2. d_t+1 ~ M_target(s_t+1, a_t+1): the *target* checkpoint (an EMA copy of the
   weights) predicts the future from there;
3. the model composes one description of the future of (s_t, a_t): what
   happened right away (r_t and what s_t+1 shows), then a summary of d_t+1.
The predicted outcome is carried over from d_t+1. At a terminal transition
there is nothing to bootstrap: the target describes the final state, and the
outcome is the real one.

Every phase is one batched call over all transitions of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from nlac_core.actions import render_message_action
from nlac_core.backends.base import Backend, Provenance, SamplingSpec
from nlac_core.outputs import BellmanTarget
from nlac_core.prompts.base import Rendered
from nlac_core.prompts.nlac import AGENT_POLICY, BACKUP, BACKUP_TERMINAL
from nlac_core.sections import continue_paragraph
from nlac_core.state import DEFAULT_MAX_CHARS, StepView, render_messages, render_outcome
from nlac_core.successor import FUTURE_PRIMER, clip_action, predict_futures, ref_of, transition_of

NEXT_ACTION_SOURCES = ("policy", "data")

PolicyPrompter = Callable[[StepView], Rendered]


def generic_policy_prompt(step: StepView, max_state_chars: int = DEFAULT_MAX_CHARS) -> Rendered:
    """The policy prompt for a stored tool-use step that has no environment of its own."""
    return AGENT_POLICY.render(state=render_messages(step.history, max_state_chars))


@dataclass(frozen=True)
class BackupConfig:
    next_action: str = "policy"
    action_tokens: int = 96
    future_tokens: int = 64
    target_tokens: int = 96
    temperature: float = 0.0
    seed: int = 0
    max_state_chars: int = DEFAULT_MAX_CHARS
    chunk_size: int = 16

    def __post_init__(self) -> None:
        if self.next_action not in NEXT_ACTION_SOURCES:
            raise ValueError(f"next_action must be 'policy' or 'data', got {self.next_action!r}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {self.chunk_size}")

    def spec(self, max_new_tokens: int) -> SamplingSpec:
        return SamplingSpec(max_new_tokens=max_new_tokens, temperature=self.temperature, seed=self.seed)


def _observed(step: StepView) -> str:
    messages = step.between
    return render_messages(messages, 1200) if messages else "(nothing: the episode ended right after the action)"


def backup(policy: Backend, target: Backend, steps: Sequence[StepView], config: BackupConfig | None = None,
           composer: Backend | None = None, policy_prompt: PolicyPrompter | None = None) -> list[BellmanTarget]:
    """Bellman targets for ``steps``; ``composer`` writes the target (default: the policy's model,
    as in NLAC where one model plays every role)."""
    config = config or BackupConfig()
    composer = composer or policy
    prompter = policy_prompt or (lambda s: generic_policy_prompt(s, config.max_state_chars))
    inner = [s for s in steps if not s.terminal]
    next_steps = [s.next_step() for s in inner]

    # 1. a_t+1: from the policy, or as recorded
    action_spec = config.spec(config.action_tokens)
    action_provenance: list[Provenance | None] = [None] * len(inner)
    if config.next_action == "policy" and inner:
        rendered = [prompter(n) for n in next_steps]
        completions = policy.generate([r.request() for r in rendered], action_spec)
        next_actions = [clip_action(c.text) for c in completions]
        action_provenance = [Provenance.of(r.prompt_id, policy, action_spec) for r in rendered]
    else:
        next_actions = [clip_action(render_message_action(n.action)) for n in next_steps]

    # 2. d_t+1 ~ M_target(s_t+1, a_t+1)
    next_transitions = [transition_of(n, a, config.max_state_chars) for n, a in zip(next_steps, next_actions,
                                                                                     strict=True)]
    next_futures = [f[0] for f in predict_futures(target, next_transitions, config.spec(config.future_tokens))]

    # 3. compose the target for (s_t, a_t)
    renders, probs, by_step = [], [], {}
    for step, action, future, made_by in zip(inner, next_actions, next_futures, action_provenance, strict=True):
        t = transition_of(step, None, config.max_state_chars)
        renders.append(BACKUP.render(state=t.state, action=t.action, reward=f"{step.reward:g}",
                                     observed=_observed(step), next_action=action, next_future=future.text))
        probs.append(future.success_prob)
        by_step[id(step)] = (action, future, made_by)
    terminals = [s for s in steps if s.terminal]
    for step in terminals:
        t = transition_of(step, None, config.max_state_chars)
        renders.append(BACKUP_TERMINAL.render(state=t.state, action=t.action, observed=_observed(step),
                                              ending=render_outcome(step.trajectory)))
        reward = step.trajectory.reward
        probs.append(None if reward is None else float(step.trajectory.success))
    target_spec = config.spec(config.target_tokens)
    paragraphs = continue_paragraph(composer, [r.request() for r in renders], "FUTURE", target_spec,
                                    primer=FUTURE_PRIMER)

    results: dict[int, BellmanTarget] = {}
    for step, render, paragraph, prob in zip([*inner, *terminals], renders, paragraphs, probs, strict=True):
        provenance = Provenance.of(render.prompt_id, composer, target_spec)
        text = paragraph.text
        if step.terminal:
            results[id(step)] = BellmanTarget(ref_of(step), text, prob, True, provenance,
                                              degenerate=paragraph.degenerate)
        else:
            action, future, made_by = by_step[id(step)]
            results[id(step)] = BellmanTarget(ref_of(step), text, prob, False, provenance, next_action=action,
                                              next_future=future.text, next_provenance=future.provenance,
                                              next_action_source=config.next_action,
                                              next_action_provenance=made_by, degenerate=paragraph.degenerate)
    return [results[id(s)] for s in steps]


def backup_chunks(policy: Backend, target: Backend, steps: Sequence[StepView], config: BackupConfig | None = None,
                  composer: Backend | None = None, policy_prompt: PolicyPrompter | None = None,
                  on_progress: Callable[[int, int], None] | None = None,
                  should_stop: Callable[[], bool] | None = None) -> Iterator[list[BellmanTarget]]:
    """Targets chunk by chunk (commit each; a re-run skips finished steps)."""
    config = config or BackupConfig()
    total = len(steps)
    for start in range(0, total, config.chunk_size):
        if should_stop and should_stop():
            return
        chunk_config = replace(config, seed=config.seed + start)
        yield backup(policy, target, steps[start:start + config.chunk_size], chunk_config, composer, policy_prompt)
        if on_progress:
            on_progress(min(start + config.chunk_size, total), total)
