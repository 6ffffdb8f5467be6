"""The refinement policy pi_r(a' | s, a, critique): the model rewrites its action
using the critique, for m rounds (default 1).

Each round's text is checked against the environment's action format
(:class:`~nlac_core.actions.ActionSpec`): a tool call must name a known tool
with JSON arguments, a 20 Questions action must be a yes/no question, a MATH
solution must box its answer. A round after the first critiques the latest
valid action again and refines that. The result keeps every round's text, the
last valid action, and whether it is valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nlac_core.actions import ActionSpec, render_message_action, tool_spec_from_names, tool_spec_from_schemas
from nlac_core.backends.base import Backend, Provenance, SamplingSpec
from nlac_core.critic import CritiqueConfig, critique
from nlac_core.envs.mock_domain import AGENT_TOOLS
from nlac_core.evaluation import is_success
from nlac_core.outputs import Critique, Refinement
from nlac_core.prompts.nlac import FORMAT_NOTES, REFINE
from nlac_core.state import StepView
from nlac_core.successor import Transition, clip_action, transition_of

ON_OPTIMAL = ("keep", "refine")


@dataclass(frozen=True)
class RefineConfig:
    rounds: int = 1
    max_new_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0
    # A step the critique judged optimal is its own target ("keep": no refine call, the refinement is the
    # original action, marked kept); "refine" rewrites it anyway. The step that won its episode is always kept.
    on_optimal: str = "keep"

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {self.rounds}")
        if self.on_optimal not in ON_OPTIMAL:
            raise ValueError(f"on_optimal must be one of {', '.join(ON_OPTIMAL)}, got {self.on_optimal!r}")

    def spec(self) -> SamplingSpec:
        return SamplingSpec(max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=self.seed)


def action_spec_for(step: StepView) -> ActionSpec:
    """The action format of a stored step: its environment's (our rollouts), the tool schemas stored with the
    trajectory (OpenAI chat JSONL), or else the tools its trajectory used. With none of these known, any tool
    call is refused (pass the schemas with ``refine --tools``)."""
    trajectory = step.trajectory
    env = trajectory.meta.get("env")
    if env in ("twenty_questions", "math"):
        return ActionSpec(env)
    if env == "tool_use":
        return ActionSpec("tool_use", AGENT_TOOLS)
    schemas = trajectory.meta.get("tools")
    if isinstance(schemas, list) and schemas:
        try:
            return tool_spec_from_schemas(schemas)
        except (KeyError, TypeError, AttributeError):
            pass  # malformed schemas: fall back to the tools the trajectory used
    names = {c.name for m in trajectory.messages if m.role == "assistant" for c in m.tool_calls
             if c.requestor == "assistant"}
    return tool_spec_from_names(names)


def _clean(text: str) -> str:
    """Drop a label the model may echo (``IMPROVED ACTION:``) and surrounding quotes."""
    text = (text or "").strip()
    for label in ("improved action:", "the improved action:", "action:"):
        if text.lower().startswith(label):
            text = text[len(label):].strip()
    return text


def keep_reason(critique: Critique, config: RefineConfig, won: bool = False) -> str:
    """Why a step keeps its action without a refine call ("" when it is to be refined)."""
    if won:
        return "won"
    if config.on_optimal == "keep" and critique.verdict == "optimal":
        return "optimal"
    return ""


def refine(backend: Backend | None, transitions: Sequence[Transition], critiques: Sequence[Critique],
           specs: Sequence[ActionSpec], config: RefineConfig | None = None,
           critique_config: CritiqueConfig | None = None, won: Sequence[bool] | None = None) -> list[Refinement]:
    """Refined actions for a batch of (transition, critique, action format) triples; only the steps the critique
    says to change are sent to the model (see ``keep_reason``), the others keep their action."""
    config = config or RefineConfig()
    won = won if won is not None else [False] * len(transitions)
    reasons = [keep_reason(c, config, w) for c, w in zip(critiques, won, strict=True)]
    todo = [i for i, reason in enumerate(reasons) if not reason]
    out: list[Refinement | None] = [None] * len(transitions)
    if todo:
        if backend is None:
            raise ValueError("refine: a backend is needed for the steps to rewrite")
        refined = _refine_all(backend, [transitions[i] for i in todo], [critiques[i] for i in todo],
                              [specs[i] for i in todo], config, critique_config)
        for i, r in zip(todo, refined, strict=True):
            out[i] = r
    provenance = Provenance(prompt_id="", backend="", model="")  # no prompt was rendered, no model called
    for i, reason in enumerate(reasons):
        if reason:
            t, c, check = transitions[i], critiques[i], specs[i].check(transitions[i].action)
            out[i] = Refinement(t.ref, t.action, t.action, check.ok, check.error or "", 0, c.render(),
                                provenance, (), kept=reason)
    return [r for r in out if r is not None]


def _refine_all(backend: Backend, transitions: Sequence[Transition], critiques: Sequence[Critique],
                specs: Sequence[ActionSpec], config: RefineConfig,
                critique_config: CritiqueConfig | None) -> list[Refinement]:
    spec = config.spec()
    n = len(transitions)
    current = [t.action for t in transitions]
    current_critiques = list(critiques)
    best: list[str | None] = [None] * n
    errors = [""] * n
    histories: list[list[str]] = [[] for _ in range(n)]
    provenance = Provenance.of(REFINE.prompt_id, backend, spec)
    for round_number in range(config.rounds):
        if round_number:
            again = [Transition(t.ref, t.state, a) for t, a in zip(transitions, current, strict=True)]
            current_critiques = critique(backend, again, critique_config or CritiqueConfig())
        rendered = [REFINE.render(state=t.state, action=a, critique=c.render(),
                                  format_note=FORMAT_NOTES[s.kind] + _tool_note(s))
                    for t, a, c, s in zip(transitions, current, current_critiques, specs, strict=True)]
        completions = backend.generate([r.request() for r in rendered], spec)
        for i, completion in enumerate(completions):
            text = _clean(completion.text)
            histories[i].append(text)
            check = specs[i].check(text)
            if check.ok:
                best[i] = clip_action(check.action.render() if check.action else text)
                current[i] = best[i]
                errors[i] = ""
            else:
                errors[i] = check.error
    return [Refinement(t.ref, t.action, best[i] if best[i] is not None else histories[i][-1],
                       best[i] is not None, "" if best[i] is not None else errors[i], config.rounds,
                       c.render(), provenance, tuple(histories[i]))
            for i, (t, c) in enumerate(zip(transitions, critiques, strict=True))]


def _tool_note(spec: ActionSpec) -> str:
    if spec.kind != "tool_use" or not spec.tools:
        return ""
    return ". Known tools: " + ", ".join(sorted(spec.tools))


def refine_steps(backend: Backend, steps: Sequence[StepView], critiques: Sequence[Critique],
                 config: RefineConfig | None = None, spec_for: Callable[[StepView], ActionSpec] = action_spec_for,
                 max_state_chars: int | None = None,
                 critique_config: CritiqueConfig | None = None) -> list[Refinement]:
    """Refine stored steps with their critiques (one critique per step, same order); ``critique_config``
    is what rounds after the first critique the new action with (default: ``CritiqueConfig()``). The step that
    won its episode (``won_episode``) and, by default, the steps judged optimal keep their action."""
    kwargs = {} if max_state_chars is None else {"max_state_chars": max_state_chars}
    transitions = [transition_of(s, render_message_action(s.action), **kwargs) for s in steps]
    return refine(backend, transitions, critiques, [spec_for(s) for s in steps], config, critique_config,
                  won=[won_episode(s) for s in steps])


def won_episode(step: StepView) -> bool:
    """The last agent step of a successful episode: what won it (a 20 Questions guess naming the word, a
    correct MATH solution, the closing step of a solved tool-use task) is never rewritten."""
    trajectory = step.trajectory
    return trajectory.reward is not None and is_success(trajectory) and step.index == len(trajectory.steps) - 1
