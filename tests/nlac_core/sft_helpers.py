"""Real-looking SFT records and one tiny training run shared by the training tests.

The run lives under the session's temporary folder and is trained once per
session: later callers (another test module) get the first call's result and
its progress events, whichever module runs first. (Calling ``train_sft`` again
would return the finished checkpoint without training, and without events:
``test_training_sft`` covers that.)
"""

from __future__ import annotations

import copy

AIRLINE_POLICY = ("You are an airline customer service agent. Verify the user's identity before changing a "
                  "reservation. Basic economy flights cannot be modified. Act with one tool call or one reply.")


def _policy_record(user: str, action: str, n: int) -> dict:
    return {"prompt": [{"role": "system", "content": AIRLINE_POLICY}, {"role": "user", "content": user}],
            "completion": [{"role": "assistant", "content": action}],
            "provenance": {"kind": "distillation", "step": {"task_id": str(n), "step_index": 0},
                           "prompt_id": "policy.tool_use@3f2a9c1e"}}


def _critic_record(state: str, action: str, target: str, n: int) -> dict:
    prompt = (f"STATE:\n{state}\n\nACTION:\n{action}\n\nDescribe what happens in the rest of the episode after this "
              "action, then the final reward.")
    return {"prompt": [{"role": "system", "content": "You predict the future of an agent's episode."},
                       {"role": "user", "content": prompt}],
            "completion": [{"role": "assistant", "content": target}],
            "provenance": {"kind": "successor", "step": {"task_id": str(n), "step_index": 2},
                           "prompt_id": "nlac.successor@9b1d0e77", "source": {"backend": "hf", "seed": n}}}


RECORDS = [
    _policy_record("Hi, I'm Mia Li (mia_li_3668). I want to cancel reservation NO6JO3.",
                   'TOOL_CALL: {"name": "get_reservation_details", "arguments": {"reservation_id": "NO6JO3"}}', 1),
    _critic_record("USER: Please change my flight to tomorrow. My user id is omar_davis_3817.",
                   'TOOL_CALL: {"name": "get_user_details", "arguments": {"user_id": "omar_davis_3817"}}',
                   "FUTURE: The agent finds the reservation, sees it is basic economy and explains that it cannot be "
                   "modified; the user accepts a cancellation instead.\nOUTCOME: reward 1.0", 2),
    _policy_record("My booking 4WQ150 is basic economy. Can you move it to Friday?",
                   "I'm sorry, basic economy flights cannot be modified. I can help you cancel it or book a new "
                   "flight instead.", 3),
    _critic_record("USER: I need to add a checked bag to reservation Z7GOZK.",
                   "Sure, I've added the bag and charged your card.",
                   "FUTURE: No tool was called, so no bag was added; the user leaves believing it was.\n"
                   "OUTCOME: reward 0.0", 4),
]


def records() -> list[dict]:
    return copy.deepcopy(RECORDS)


_RUNS: dict[tuple, tuple] = {}


def small_run(tmp_path_factory, embedded_model_dir, name: str = "sft-2-steps", **config):
    """A 2-step SFT of the embedded model (batch 2, max_length 256), trained once per session:
    (TrainResult, the progress events of that training)."""
    from nlac_core.training import SFTRunConfig, train_sft

    key = (str(tmp_path_factory.getbasetemp()), name, tuple(sorted(config.items())))
    if key in _RUNS:
        return _RUNS[key]
    events = []
    settings = {"max_steps": 2, "per_device_batch_size": 2, "max_length": 256, "learning_rate": 1e-4, **config}
    out = tmp_path_factory.getbasetemp() / name
    result = train_sft(records(), embedded_model_dir, out, SFTRunConfig(**settings), on_progress=events.append,
                       name=name)
    _RUNS[key] = result, events
    return result, events
