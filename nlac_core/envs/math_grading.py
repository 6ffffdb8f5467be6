"""Is a MATH answer right? ``math-verify`` decides, with its timeouts made safe off the main thread.

math-verify parses both answers to SymPy and compares them (so ``14/3`` equals
``\\frac{14}{3}`` and an interval written either way is one interval). Sympy
can hang on hostile input, so math-verify guards each parse and comparison
with ``signal.alarm`` — which only works in the main thread of the main
interpreter, and raises there otherwise. Here:

- on the main thread (the CLI, a Celery prefork child), the check runs
  in-process with math-verify's own timeouts;
- on any other thread (a thread-pool worker, a web request), it runs in a
  small spawned child process, where it is the main thread again and the
  same timeouts work, with a wall-clock limit around it; a child that
  overruns is killed and the answer counts as wrong ("timeout").

Gold answers are MATH's ``answer`` field (LaTeX without delimiters): they are
wrapped as ``$\\boxed{...}$`` so that math-verify reads them as one boxed
expression, and so are the policy's boxed answers.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

PARSE_TIMEOUT_S = 5
VERIFY_TIMEOUT_S = 5
CHILD_TIMEOUT_S = 30

_pool = None
_pool_lock = threading.Lock()


@dataclass(frozen=True)
class Grade:
    correct: bool
    error: str = ""  # why an answer could not be compared ("" when it was)


def wrap(answer: str) -> str:
    return f"$\\boxed{{{answer.strip()}}}$"


def grade_in_process(gold: str, predicted: str, timeouts: bool = True) -> Grade:
    """Compare two LaTeX answers (no delimiters) with math-verify in this thread."""
    from math_verify import parse, verify  # lazy: math-verify (sympy) loads in seconds

    parse_timeout = PARSE_TIMEOUT_S if timeouts else None
    gold_parsed = parse(wrap(gold), parsing_timeout=parse_timeout)
    if not gold_parsed:
        return Grade(False, f"the gold answer {gold!r} could not be parsed")
    predicted_parsed = parse(wrap(predicted), parsing_timeout=parse_timeout)
    if not predicted_parsed:
        return Grade(False, "the answer could not be parsed")
    return Grade(bool(verify(gold_parsed, predicted_parsed, timeout_seconds=VERIFY_TIMEOUT_S if timeouts else None)))


def _child_grade(gold: str, predicted: str) -> tuple[bool, str]:
    grade = grade_in_process(gold, predicted)
    return grade.correct, grade.error


def _child_pool():
    global _pool
    if _pool is None:
        _pool = multiprocessing.get_context("spawn").Pool(1)
        atexit.register(_kill_pool)  # a pool left to the garbage collector at exit complains on stderr
    return _pool


def _kill_pool() -> None:
    global _pool
    if _pool is not None:
        _pool.terminate()
        _pool = None


def grade(gold: str, predicted: str) -> Grade:
    """math-verify's verdict on ``predicted`` against ``gold``, safe on any thread."""
    if threading.current_thread() is threading.main_thread():
        return grade_in_process(gold, predicted)
    with _pool_lock:
        try:
            pool = _child_pool()
        except (AssertionError, OSError) as exc:  # a daemonic process may not have children
            log.warning("math grading without timeouts: cannot start a child process (%s)", exc)
            return grade_in_process(gold, predicted, timeouts=False)
        result = pool.apply_async(_child_grade, (gold, predicted))
        try:
            correct, error = result.get(CHILD_TIMEOUT_S)
        except multiprocessing.TimeoutError:
            _kill_pool()
            return Grade(False, "timeout")
        return Grade(correct, error)
