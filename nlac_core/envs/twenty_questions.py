"""20 Questions as LMRL-Gym defines it: the guesser asks yes/no questions, an oracle answers.

The hidden object comes from LMRL-Gym's word list (17 categories, 158 objects;
each entry is ';'-separated variants, the first canonical). Reward is -1 for
each question and 0 for the question that names the object (any variant, as a
whole word, case-insensitive), which wins and ends the game; after 20
questions the game is lost. An action that is not a yes/no question still
costs its turn (and its point) and is answered with a short note instead of
the oracle (the reason is in the step's info and the message's meta), so the
policy and a critic can see what went wrong.

The oracle is an LLM told the object. Where the backend can score, the answer
is whichever of "Yes." / "No." it finds likelier, so it is never invalid;
otherwise it generates and anything but a yes reads as "No.". All oracle calls
of a turn are one backend call across the live episodes (see ``envs.base``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlac_core.actions import ActionSpec
from nlac_core.backends.base import Backend, ChatRequest, SamplingSpec, ScoreRequest, Unsupported
from nlac_core.envs.base import EnvError, Environment, LLMQuery, StepResult, data_path, take
from nlac_core.prompts import envs as env_prompts
from nlac_core.prompts import policy as policy_prompts
from nlac_core.prompts.base import Rendered
from nlac_core.records import Message, TaskRecord

DEFAULT_WORDS = "twenty-questions/twenty_questions_default_word_list.json"
MAX_QUESTIONS = 20
SPLITS = ("all", "train", "test")
INTRO = "Let's play 20 Questions. I am thinking of an object: find it with yes/no questions."
YES, NO = env_prompts.ORACLE_ANSWERS
INVALID_NOTE = "(Not a yes/no question.)"


@dataclass(frozen=True)
class Word:
    """A hidden object: its canonical name, every name that counts, and its category."""

    canonical: str
    variants: tuple[str, ...]
    category: str

    def named_in(self, question: str) -> str | None:
        """The variant a question names (whole word, any case), or None."""
        for variant in self.variants:
            if re.search(rf"(?<!\w){re.escape(variant)}(?!\w)", question, re.IGNORECASE):
                return variant
        return None


def load_words(path: str | Path | None = None) -> list[Word]:
    """The word list in a stable order that interleaves categories (so a ``limit`` samples all of them)."""
    path = data_path(path, DEFAULT_WORDS, "20 Questions word list")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EnvError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    categories = data.get("categories") if isinstance(data, dict) else None
    if not isinstance(categories, dict) or not categories:
        raise EnvError(f"{path}: expected an object with a non-empty \"categories\" object of word lists")
    by_category: list[list[Word]] = []
    for category, entries in categories.items():
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise EnvError(f"{path}: categories.{category} must be a list of strings")
        words = []
        for i, entry in enumerate(entries):
            variants = tuple(v.strip() for v in entry.split(";") if v.strip())
            if not variants:
                raise EnvError(f"{path}: categories.{category}[{i}] is empty")
            words.append(Word(variants[0], variants, category))
        by_category.append(words)
    longest = max(len(words) for words in by_category)
    return [words[i] for i in range(longest) for words in by_category if i < len(words)]


def splits_of(words: list[Word]) -> dict[str, str]:
    """A fixed held-out fifth: every fifth word of each category (in list order) is ``test``, the rest ``train``."""
    position: dict[str, int] = {}
    out = {}
    for word in words:
        index = position[word.category] = position.get(word.category, -1) + 1
        out[word.canonical] = "test" if index % 5 == 4 else "train"
    return out


def parse_oracle_text(text: str) -> str:
    """A generated oracle answer: a yes is "Yes.", anything else (a no, a refusal, prose) reads as "No."."""
    return YES if re.match(r"\s*[\"'*(]*yes\b", text or "", re.IGNORECASE) else NO


class _Shared:
    """What sibling slots share: the words, the oracle and whether it can score."""

    def __init__(self, oracle: Backend, words: list[Word], oracle_spec: SamplingSpec, score: bool) -> None:
        self.oracle = oracle
        self.words = words
        self.by_name = {w.canonical: w for w in words}
        self.split_of = splits_of(words)
        self.oracle_spec = oracle_spec
        self.score = score


class TwentyQuestionsEnv(Environment):
    name = "twenty_questions"
    policy_template = policy_prompts.TWENTY_QUESTIONS
    policy_stop = ("\n",)
    default_max_new_tokens = 32
    action_spec = ActionSpec("twenty_questions")

    def __init__(self, oracle: Backend, words_path: str | Path | None = None, max_questions: int = MAX_QUESTIONS,
                 oracle_spec: SamplingSpec | None = None, score_answers: bool = True,
                 _shared: _Shared | None = None) -> None:
        super().__init__()
        if not 1 <= max_questions <= 1000:
            raise EnvError(f"twenty_questions: max_questions must be between 1 and 1000, got {max_questions}")
        self.max_turns = max_questions
        self._shared = _shared or _Shared(oracle, load_words(words_path),
                                          oracle_spec or SamplingSpec(max_new_tokens=4), score_answers)

    @property
    def words(self) -> list[Word]:
        return self._shared.words

    @property
    def env_models(self) -> str:
        return self._shared.oracle.model

    @property
    def env_llm(self) -> dict[str, Any]:
        shared = self._shared
        return {"role": "oracle", "backend": shared.oracle.name, "model": shared.oracle.model,
                "mode": "loglikelihood" if shared.score else "generate",
                "sampling": None if shared.score else shared.oracle_spec.to_dict()}

    def spawn(self) -> TwentyQuestionsEnv:
        return TwentyQuestionsEnv(self._shared.oracle, max_questions=self.max_turns, _shared=self._shared)

    def tasks(self, split: str = "", limit: int | None = None) -> list[TaskRecord]:
        """``all`` (default), ``train`` or ``test``; a task's own ``split`` is always train or test."""
        split = split or "all"
        if split not in SPLITS:
            raise EnvError(f"twenty_questions: unknown split {split!r}; known: {', '.join(SPLITS)}")
        chosen = [w for w in self.words if split == "all" or self._shared.split_of[w.canonical] == split]
        return [self.task_for(w) for w in take(chosen, limit, "twenty_questions")]

    def task_for(self, word: Word | str) -> TaskRecord:
        """The task of one word (by its canonical name or a Word of the list)."""
        name = word if isinstance(word, str) else word.canonical
        if name not in self._shared.by_name:
            raise EnvError(f"twenty_questions: {name!r} is not in the word list")
        word = self._shared.by_name[name]
        return TaskRecord(external_id=word.canonical, instruction=INTRO, gold_answer=word.canonical,
                          gold_outputs=word.variants, split=self._shared.split_of[name],
                          meta={"category": word.category})

    def render_policy(self, task: TaskRecord, history: Sequence[Message]) -> Rendered:
        """System text, the game so far as chat turns, then the last answer with the questions left."""
        turns = [m for m in history if m.role in ("user", "assistant")]
        opening = turns[0].content if turns and turns[0].role == "user" else INTRO
        dialogue = turns[1:] if turns and turns[0].role == "user" else turns
        asked = sum(1 for m in dialogue if m.role == "assistant")
        last = dialogue[-1].content if dialogue and dialogue[-1].role == "user" else None
        earlier = dialogue[:-1] if last is not None else dialogue
        final = self.policy_template.render(answer=last if last is not None else opening,
                                            left=max(0, self.max_turns - asked))
        head, closing = final.messages[:-1], final.messages[-1]  # system and the example game; the last turn
        chat = [{"role": "user", "content": opening}] if earlier else []
        chat += [{"role": m.role, "content": m.content or ""} for m in earlier]
        return Rendered([*head, *chat, closing], final.prompt_id, final.assistant_prefix)

    def _word(self) -> Word:
        assert self.task is not None
        name = self.task.gold_answer or self.task.external_id
        word = self._shared.by_name.get(name)
        if word is None:  # a task from elsewhere (an imported record): its own variants
            word = Word(name, tuple(self.task.gold_outputs) or (name,), str(self.task.meta.get("category", "")))
        return word

    def _reset(self, task: TaskRecord) -> str:
        self.messages.append(Message(role="user", content=INTRO))
        return INTRO

    def _step(self, action_text: str):
        word = self._word()
        check = self.action_spec.check(action_text)
        text = (action_text or "").strip()
        if not check.ok:
            answer = INVALID_NOTE  # short: every later prompt repeats it; the reason is in the meta and info
            self._record(text, answer, -1.0, {"action_error": check.error})
            return self._after(StepResult(answer, -1.0, False, {"error": check.error, "named": False}))
        question = check.action.text
        variant = word.named_in(question)
        if variant is not None:
            self._record(text, YES, 0.0, {})
            self._finish("guessed", self._summary(won=True))
            return StepResult(YES, 0.0, True, {"question": question, "answer": YES, "named": True,
                                                "variant": variant})
        answer, meta = yield from self._ask_oracle(word, question)
        self._record(text, answer, -1.0, {}, meta)
        return self._after(StepResult(answer, -1.0, False, {"question": question, "answer": answer,
                                                              "named": False}))

    def _ask_oracle(self, word: Word, question: str):
        """Yes or No from the oracle: by log-likelihood where it can score, else generated and parsed."""
        shared = self._shared
        rendered = env_prompts.ORACLE.render(word=word.canonical, question=question)
        if shared.score:
            try:
                yes, no = yield LLMQuery(shared.oracle, tuple(ScoreRequest(rendered.messages, a) for a in (YES, NO)))
            except Unsupported:
                shared.score = False
            else:
                return (YES if yes > no else NO), {"oracle_mode": "loglikelihood", "oracle_prompt": rendered.prompt_id,
                                                   "yes_logprob": round(yes, 4), "no_logprob": round(no, 4)}
        completions = yield LLMQuery(shared.oracle, (ChatRequest(rendered.messages),), shared.oracle_spec)
        self.count("oracle", completions)
        raw = completions[0].text
        answer = parse_oracle_text(raw)
        meta: dict[str, Any] = {"oracle_mode": "generate", "oracle_prompt": rendered.prompt_id}
        if raw.strip() != answer:
            meta["oracle_text"] = raw
        return answer, meta

    def _record(self, question: str, answer: str, reward: float, action_meta: dict[str, Any],
                answer_meta: dict[str, Any] | None = None) -> None:
        self.messages.append(Message(role="assistant", content=question, turn_idx=self.turns - 1,
                                     meta={"reward": reward, **action_meta}))
        self.messages.append(Message(role="user", content=answer, turn_idx=self.turns - 1, meta=answer_meta or {}))

    def _after(self, result: StepResult) -> StepResult:
        """A question that did not win: the game is lost once the questions are used up."""
        if self.turns >= self.max_turns:
            self._finish("max_questions", self._summary(won=False))
            return StepResult(result.observation, result.reward, True, result.info)
        return result

    def _summary(self, won: bool) -> dict[str, Any]:
        invalid = sum(1 for m in self.messages if m.role == "assistant" and "action_error" in m.meta)
        return {"success": won, "won": won, "word": self._word().canonical, "questions": self.turns,
                "invalid_questions": invalid}

    def _truncated_reward_info(self, reason: str) -> dict[str, Any]:
        return {**self._summary(won=False), "note": f"the game was cut short ({reason})"}
