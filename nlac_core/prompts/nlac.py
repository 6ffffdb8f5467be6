"""The prompts of the NLAC roles on agent steps: successor, evaluator, Bellman
backup (and its terminal variant), refinement, the generic agent policy for
imported trajectories, and the runtime critic of the asymmetric actor-critic.

Every role writes labelled sections, one per line (``FUTURE: ...``). The small
embedded model ignores such formats when asked for all of them at once, so
the algorithm can also write them section by section (the header pre-filled
in the assistant turn, generation stopped at the newline) and choose
categorical values by log-likelihood; see ``nlac_core.critic``. The few-shot
example below shows the format for the one-shot ("free") mode.
"""

from __future__ import annotations

from nlac_core.prompts.base import PromptTemplate

OUTCOMES = ("success", "failure")
VERDICTS = ("optimal", "suboptimal", "harmful")
DECISIONS = ("approve", "intervene")

_TRANSITION = """CONVERSATION SO FAR:
{state}

THE AGENT'S ACTION:
{action}"""

SUCCESSOR = PromptTemplate(
    name="successor",
    system=("You predict how an AI agent's episode will continue. Given the conversation so far and the agent's "
            "next action, describe in one or two sentences what will most likely happen in the rest of the "
            "episode, then say whether it will end in success or failure.\n"
            "Answer in exactly two lines:\nFUTURE: <what happens next>\nOUTCOME: <success or failure>"),
    user=_TRANSITION + "\n\nPredict the future after this action.",
)

_EVALUATOR_EXAMPLE = (
    "CONVERSATION SO FAR:\nUSER: Please cancel my order #W123, it has not shipped.\n\n"
    "THE AGENT'S ACTION:\nTOOL_CALL: {\"name\": \"cancel_order\", \"arguments\": {\"order_id\": \"#W123\"}}\n\n"
    "PREDICTED FUTURES:\n1. The order is cancelled without the user's confirmation; the user is surprised.\n\n"
    "Critique the action.",
    "FUTURE: The order is cancelled at once, before the user confirmed the details.\n"
    "OUTCOME: failure\n"
    "VERDICT: suboptimal\n"
    "REASON: The policy requires listing the action and getting an explicit yes before changing an order.\n"
    "SUGGESTION: First look up the order, list what will be cancelled, and ask the user to confirm.",
)

EVALUATOR = PromptTemplate(
    name="evaluator",
    system=("You are a critic of an AI agent. You read the conversation so far, the agent's action, and "
            "predictions of what happens after it, and you judge the action.\n"
            "Answer in exactly five lines:\n"
            "FUTURE: <what will happen after the action>\n"
            "OUTCOME: <success or failure>\n"
            "VERDICT: <optimal, suboptimal or harmful>\n"
            "REASON: <why>\n"
            "SUGGESTION: <a better action, or 'keep it' if it is optimal>"),
    user=_TRANSITION + "\n\nPREDICTED FUTURES:\n{futures}\n\nCritique the action.",
    few_shot=(_EVALUATOR_EXAMPLE,),
)

EVALUATOR_ZERO_SHOT = PromptTemplate(name="evaluator_zero_shot", system=EVALUATOR.system, user=EVALUATOR.user)


def evaluator_for(mode: str) -> PromptTemplate:
    """The evaluator prompt of a critique mode: "free" writes the whole critique after a worked example (an
    untrained model needs one); "sectioned" (the default) writes it section by section without one. A critic
    is trained on the sectioned prompt (``TRAINED_EVALUATOR``): the prompt it is then judged and used with."""
    return EVALUATOR if mode == "free" else EVALUATOR_ZERO_SHOT


TRAINED_EVALUATOR = evaluator_for("sectioned")

BACKUP = PromptTemplate(
    name="backup",
    system=("You write what happens after an AI agent's action. You are told what happened right after it, "
            "and a prediction of the rest of the episode from the next step. Combine them into one description: "
            "first what happened right away, then a shorter summary of the prediction.\n"
            "Answer in one line:\nFUTURE: <the combined description>"),
    user=(_TRANSITION + "\n\nWHAT HAPPENED RIGHT AFTER (reward {reward}):\n{observed}\n\n"
          "THE AGENT'S NEXT ACTION:\n{next_action}\n\nPREDICTED REST OF THE EPISODE:\n{next_future}\n\n"
          "Describe the future after the agent's action."),
)

BACKUP_TERMINAL = PromptTemplate(
    name="backup_terminal",
    system=("You write what happens after an AI agent's last action. You are told what happened after it and "
            "how the episode ended. Describe the final state in one or two sentences.\n"
            "Answer in one line:\nFUTURE: <the description>"),
    user=(_TRANSITION + "\n\nWHAT HAPPENED AFTER:\n{observed}\n\nHOW THE EPISODE ENDED: {ending}\n\n"
          "Describe the future after the agent's action."),
)

REFINE = PromptTemplate(
    name="refine",
    system=("You improve an AI agent's action using a critique of it. Follow the critique's suggestion and write "
            "only the improved action, in the same format as the original action, with nothing before or after."),
    user=_TRANSITION + "\n\nCRITIQUE:\n{critique}\n\nFORMAT: {format_note}\n\nWrite the improved action.",
)

FORMAT_NOTES = {
    "tool_use": ("a reply to the user as plain text, or exactly one tool call written as "
                 'TOOL_CALL: {"name": "<tool>", "arguments": {...}}'),
    "twenty_questions": "one yes/no question ending with '?' (name the object in the question to guess it)",
    "math": "a complete solution that ends with the final answer in \\boxed{...}",
}

AGENT_POLICY = PromptTemplate(
    name="agent_policy",
    system=("You are a customer-service agent that follows its policy and uses tools. Write your next action: "
            "either a reply to the user as plain text, or exactly one tool call written as "
            "TOOL_CALL: {\"name\": \"<tool>\", \"arguments\": {...}}."),
    user="CONVERSATION SO FAR:\n{state}\n\nWrite the agent's next action.",
)

RUNTIME_CRITIC = PromptTemplate(
    name="runtime_critic",
    system=("You check an AI agent's proposed action before it runs. Approve it when it follows the policy and "
            "moves the task forward; otherwise intervene and say what rule it breaks, what is missing, and what "
            "to do instead.\nAnswer in two lines:\nDECISION: <approve or intervene>\nFEEDBACK: <why, and what to "
            "do instead>"),
    user="POLICY:\n{policy}\n\nCONVERSATION SO FAR:\n{state}\n\nPROPOSED ACTION:\n{action}\n\nCheck the action.",
)

# What the actor is told when the runtime critic stops a proposed action (the actor only: never the user
# simulator or the environment). Follows the actor's own prompt and its rejected proposal.
ACTOR_FEEDBACK = ("A reviewer checked that action before it ran and stopped it.\nFEEDBACK: {feedback}\n\n"
                  "Write your action again, following the feedback, in the same format.")

# The runtime critic's target feedback at an episode's first wrong action (``critic_data.runtime_labels``): what
# is wrong with it and the action the task needs next (the gold action, with the arguments that are compared).
FIRST_ERROR_FEEDBACK = "This action does not do what the task needs next ({reason}): expected {expected}."

ALL = (SUCCESSOR, EVALUATOR, EVALUATOR_ZERO_SHOT, BACKUP, BACKUP_TERMINAL, REFINE, AGENT_POLICY, RUNTIME_CRITIC)
