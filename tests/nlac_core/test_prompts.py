"""Prompt templates: golden renderings, ids that follow the wording, safe substitution.

``golden/prompts.json`` holds every template rendered with ``<field>`` values.
A template edit fails the golden test on purpose: read the diff, then accept
the new wording with ``NLAC_UPDATE_GOLDEN=1 pytest tests/nlac_core/test_prompts.py``
(its prompt_id changes with it, so stored records keep naming the old one).
"""

import json
import os
from pathlib import Path

import pytest

from nlac_core.prompts import envs, nlac, policy
from nlac_core.prompts.base import PromptTemplate
from nlac_core.prompts.nlac import BACKUP_TERMINAL, EVALUATOR, REFINE, SUCCESSOR

GOLDEN = Path(__file__).parent / "golden" / "prompts.json"
EVERY_TEMPLATE = (*nlac.ALL, *policy.ALL, *envs.ALL)


def render_all() -> dict:
    out = {}
    for template in EVERY_TEMPLATE:
        rendered = template.render(**{f: f"<{f}>" for f in template.fields})
        out[template.name] = {"prompt_id": rendered.prompt_id, "assistant_prefix": rendered.assistant_prefix,
                              "messages": rendered.messages}
    return out


def test_it_renders_every_template_exactly_as_the_golden_file():
    current = render_all()
    if os.environ.get("NLAC_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(current, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(golden) == sorted(current), "templates added or removed: update the golden file"
    for name, expected in golden.items():
        assert current[name] == expected, f"{name} changed: see the module docstring to accept it"
    assert {"successor", "evaluator", "backup", "backup_terminal", "refine", "runtime_critic",
            "policy_twenty_questions", "policy_math", "policy_tool_use", "oracle_twenty_questions",
            "user_simulator"} <= set(golden)


def test_it_renders_the_successor_prompt_exactly():
    rendered = SUCCESSOR.render(state="USER: hi", action="AGENT: hello")
    assert rendered.prompt_id == SUCCESSOR.prompt_id
    assert [m["role"] for m in rendered.messages] == ["system", "user"]
    assert rendered.messages[1]["content"] == (
        "CONVERSATION SO FAR:\nUSER: hi\n\nTHE AGENT'S ACTION:\nAGENT: hello\n\nPredict the future after this action.")
    assert rendered.messages[0]["content"].endswith("FUTURE: <what happens next>\nOUTCOME: <success or failure>")


def test_it_puts_the_worked_example_before_the_request_in_the_evaluator():
    rendered = EVALUATOR.render(state="s", action="a", futures="1. f")
    assert [m["role"] for m in rendered.messages] == ["system", "user", "assistant", "user"]
    example = rendered.messages[2]["content"].splitlines()
    assert [line.split(":")[0] for line in example] == ["FUTURE", "OUTCOME", "VERDICT", "REASON", "SUGGESTION"]


def test_it_gives_every_template_a_distinct_versioned_id():
    ids = [t.prompt_id for t in EVERY_TEMPLATE]
    assert len(set(ids)) == len(ids) and len({t.name for t in EVERY_TEMPLATE}) == len(ids)
    for template in EVERY_TEMPLATE:
        name, _, digest = template.prompt_id.partition("@")
        assert name == template.name and len(digest) == 8


def test_it_changes_the_id_when_the_wording_changes():
    a = PromptTemplate("p", "system", "Say {x}.")
    b = PromptTemplate("p", "system", "Say {x}!")
    assert a.prompt_id != b.prompt_id
    assert a.prompt_id == PromptTemplate("p", "system", "Say {x}.").prompt_id


def test_it_substitutes_hostile_text_without_reinterpreting_it():
    hostile = 'TOOL_CALL: {"name": "x", "arguments": {"a": "{state}"}} {0} {{}}'
    rendered = REFINE.render(state=hostile, action="a", critique="c", format_note="n")
    assert hostile in rendered.messages[-1]["content"]


def test_it_names_the_missing_fields():
    with pytest.raises(KeyError, match="observed, ending"):
        BACKUP_TERMINAL.render(state="s", action="a")
