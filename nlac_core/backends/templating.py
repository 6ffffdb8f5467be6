"""How a chat request becomes prompt tokens: one place, shared by the hf and vllm backends.

The prompt is the tokenizer's chat template with the generation prompt added
(``<|im_start|>assistant\\n`` and the like), then the assistant prefix as
plain text. Both backends score and generate after exactly these tokens, so a
choice scored on one backend means the same on the other.
"""

from __future__ import annotations

from typing import Any


def plain_messages(messages) -> list[dict[str, Any]]:
    """Chat templates expect ``content`` to be a string: a null content (tool-call turns) renders as empty."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


def prompt_ids(tokenizer, request) -> list[int]:
    """Token ids of ``request`` (a ChatRequest or ScoreRequest), assistant prefix included."""
    text = tokenizer.apply_chat_template(plain_messages(request.messages), tokenize=False,
                                         add_generation_prompt=True)
    return tokenizer.encode(text + request.assistant_prefix, add_special_tokens=False)
