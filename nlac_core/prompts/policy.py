"""The policy prompts of our environments: pi(a | s) for 20 Questions, MATH and the tau2 mock domain.

Each prompt is a function of the state alone (the task and the messages so
far), so that a state from a live episode and the same state read back from a
stored trajectory render to the same prompt: NLAC distils refined actions into
the policy on exactly these prompts. MATH and tool use show the state as text
in one user message; 20 Questions shows the game as a chat (see below). The
action format is the one ``nlac_core.actions`` checks.
"""

from __future__ import annotations

from nlac_core.prompts.base import PromptTemplate

TWENTY_QUESTIONS = PromptTemplate(
    name="policy_twenty_questions",
    system=("You play 20 Questions: find the hidden object by asking yes/no questions, one per turn. You win when "
            "a question names the object, like \"Is it a guitar?\". Write only your next question."),
    # The game so far goes between the example and this last user turn, as a chat: the questions as the
    # assistant's turns, the answers as the user's (a transcript in one message makes a small model write
    # "question? answer." lines). ``{answer}`` is the last answer, or the opening line before any question.
    # The prompt is re-read every turn by every game, so it is kept short: on a CPU its length is the cost.
    user="{answer}\n\nYou have {left} questions left. Ask your next yes/no question.",
    few_shot=(  # a short example, so that a small model sees that a turn is one bare question
        ("I am thinking of an object.\n\nYou have 20 questions left. Ask your next yes/no question.",
         "Is it a living thing?"),
        ("No.\n\nYou have 19 questions left. Ask your next yes/no question.", "Is it used in the kitchen?"),
    ),
)

_MATH_ASK = "\n\nSolve it briefly, then end with: The answer is $\\boxed{...}$."

# The closing instruction and the one-shot example are what make the small embedded model box its answer at all
# (8 of the first 10 MATH500 problems, against 0 with the system text alone); the example is short on purpose.
MATH = PromptTemplate(
    name="policy_math",
    system=("You are a careful mathematician. Solve the problem step by step, then write the final answer in "
            "LaTeX inside \\boxed{...} at the end of your solution."),
    user="{problem}" + _MATH_ASK.replace("{", "{{").replace("}", "}}"),
    few_shot=(
        ("What is $3 \\cdot 4 + 5$?" + _MATH_ASK,
         "First, $3 \\cdot 4 = 12$. Then $12 + 5 = 17$.\n\nThe answer is $\\boxed{17}$."),
    ),
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
