"""The last ``\\boxed{...}`` of a solution, with balanced braces (or ``\\boxed 5``, LaTeX's brace-less form)."""

from __future__ import annotations

import re

_BARE = re.compile(r"\s*([^\s${}\\]+)")


def extract_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = start + len("\\boxed")
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "{":  # "\boxed 5": one token, never a brace further on
        bare = _BARE.match(text, start + len("\\boxed"))
        return bare.group(1) if bare and text[start + len("\\boxed")].isspace() else None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j].strip()
    return None
