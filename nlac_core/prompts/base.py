"""Prompt templates: versioned by content, rendered to chat messages.

A template is a system text, a user text with ``{named}`` fields, and optional
few-shot exchanges. Its ``prompt_id`` is ``name@`` plus a short hash of all of
it, so any edit to a template gives new records a new id and old records keep
saying which wording produced them. Values substituted into a template are
never re-parsed, so braces in trajectory text are safe.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, field
from typing import Any

from nlac_core.backends.base import ChatRequest


@dataclass(frozen=True)
class Rendered:
    messages: list[dict[str, Any]]
    prompt_id: str
    assistant_prefix: str = ""

    def request(self, assistant_prefix: str | None = None) -> ChatRequest:
        prefix = self.assistant_prefix if assistant_prefix is None else assistant_prefix
        return ChatRequest(self.messages, prefix)


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: str
    user: str
    few_shot: tuple[tuple[str, str], ...] = ()  # (user, assistant) pairs shown before the real request
    assistant_prefix: str = ""
    fields: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        names = [f for _, f, _, _ in string.Formatter().parse(self.user) if f]
        object.__setattr__(self, "fields", tuple(dict.fromkeys(names)))

    @property
    def prompt_id(self) -> str:
        digest = hashlib.sha256(repr((self.system, self.user, self.few_shot, self.assistant_prefix)).encode())
        return f"{self.name}@{digest.hexdigest()[:8]}"

    def render(self, **values: Any) -> Rendered:
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise KeyError(f"prompt {self.name!r} needs {', '.join(missing)}")
        messages: list[dict[str, Any]] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        for user, assistant in self.few_shot:
            messages.append({"role": "user", "content": user})
            messages.append({"role": "assistant", "content": assistant})
        messages.append({"role": "user", "content": self.user.format(**{f: values[f] for f in self.fields})})
        return Rendered(messages, self.prompt_id, self.assistant_prefix)
