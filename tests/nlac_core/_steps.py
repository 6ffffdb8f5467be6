"""Real tau-bench steps for the algorithm tests (read once per session)."""

from __future__ import annotations

import functools
import itertools

import pytest

from nlac_core.state import steps_of
from tests.conftest import TAU_GPT4O


@functools.cache
def tau_trajectories(n: int = 3):
    if not TAU_GPT4O.is_file():
        pytest.skip("../shared/data is not beside this checkout")
    from nlac_core.formats import read

    return tuple(i.record for i in itertools.islice(read(TAU_GPT4O), n))


def tau_steps(n_trajectories: int = 1):
    return [s for t in tau_trajectories(n_trajectories) for s in steps_of(t)]
