"""The prompts of the environments' own LLM roles: the 20 Questions oracle and the tau2 simulated user.

Their prompt ids go into the trajectory's meta next to the policy's, so a
change of oracle wording is visible in every episode it played. Parsing of
their output lives beside the environment that reads it (``nlac_core.envs``).
"""

from __future__ import annotations

from nlac_core.prompts.base import PromptTemplate

ORACLE_ANSWERS = ("Yes.", "No.")

ORACLE = PromptTemplate(
    name="oracle_twenty_questions",
    system=("You are the oracle in a game of 20 Questions. You know the hidden object and answer the player's "
            "yes/no question about it truthfully. Answer with exactly one word: \"Yes.\" or \"No.\"."),
    user="The hidden object is: {word}.\n\nThe player asks: {question}\n\nAnswer \"Yes.\" or \"No.\".",
)

STOP_TOKEN = "###STOP###"

# As in tau2, the scenario (this template's user text) is appended to the system text, and the conversation
# follows as a chat with the roles flipped: the agent's messages are the "user" turns, the simulated user's own
# messages the "assistant" turns. (Shown as a transcript inside a user message, a small model copies the
# transcript back.)
USER_SIMULATOR = PromptTemplate(
    name="user_simulator",
    system=("You play a user who talks to a customer-service agent, to get something done. Stay in character and "
            "follow your instructions; do not invent needs that are not in them. Write only your next message to "
            "the agent, short and natural. If you need one of your own tools, write one tool call on one line as\n"
            "TOOL_CALL: {\"name\": \"<tool>\", \"arguments\": {...}}\n"
            f"When your goal is reached, or cannot be reached, write {STOP_TOKEN} to end the conversation."),
    user="YOUR PERSONA: {persona}\n\nYOUR INSTRUCTIONS: {instructions}\n\nYOUR TOOLS:\n{tools}",
)

ALL = (ORACLE, USER_SIMULATOR)
