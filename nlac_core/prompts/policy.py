"""The policy prompts of our environments: pi(a | s) for 20 Questions, MATH and the tau2 mock domain.

Each prompt shows the whole state as text in one user message (the questions
asked so far, the problem, the conversation so far), so that a state from a
live episode and the same state read back from a stored trajectory render to
the same prompt: NLAC distils refined actions into the policy on exactly
these prompts. The action format is the one ``nlac_core.actions`` checks.
"""

from __future__ import annotations

from nlac_core.prompts.base import PromptTemplate

TWENTY_QUESTIONS = PromptTemplate(
    name="policy_twenty_questions",
    system=("You are playing 20 Questions. The other player thinks of an object; you find it by asking yes/no "
            "questions, one per turn, and they answer only \"Yes.\" or \"No.\". You win when a question names the "
            "object, for example \"Is it a guitar?\". Each question costs a point, so narrow down the possibilities "
            "quickly and guess as soon as you are fairly sure. Write only your next question, on one line."),
    user="{history}\n\nYou have {left} questions left. Ask your next yes/no question.",
    few_shot=(
        ("No questions asked yet.\n\nYou have 20 questions left. Ask your next yes/no question.",
         "Is it a living thing?"),
    ),
)

MATH = PromptTemplate(
    name="policy_math",
    system=("You are a careful mathematician. Solve the problem step by step, then write the final answer in "
            "LaTeX inside \\boxed{...} at the end of your solution."),
    user="{problem}",
)

TOOL_USE = PromptTemplate(
    name="policy_tool_use",
    system=("You are a customer-service agent. Follow the policy, help the user with their request, and use the "
            "tools to act on the system. Write only your next action: either a reply to the user as plain text, "
            "or exactly one tool call on one line written as\n"
            "TOOL_CALL: {\"name\": \"<tool>\", \"arguments\": {...}}"),
    user="POLICY:\n{policy}\n\nTOOLS:\n{tools}\n\nCONVERSATION SO FAR:\n{state}\n\nWrite the agent's next action.",
)

ALL = (TWENTY_QUESTIONS, MATH, TOOL_USE)
