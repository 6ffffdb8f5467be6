"""The one error a service raises for a bad input field: ``field`` names the place, ``message`` says what is
wrong. Job configs, dataset specs and queue specs raise it (as ``ConfigError``, ``SpecError`` and ``QueueError``,
the names their callers know); forms put it back on the field it names, the API answers 400 with the field."""

from __future__ import annotations


class FieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
