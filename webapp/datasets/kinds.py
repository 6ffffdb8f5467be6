"""Every dataset kind, declared once: its label, the options of the spec that apply to it, the candidate sets a
build reads for its steps, its record builder, the formats its snapshots export to, and (from the job kinds)
which job trains or evaluates on it. The model's choices, the spec check, the build, the exports and the
snapshot page read this table; adding a kind is one entry here and its builder in ``services/build.py``
(``tests/webapp/datasets/test_dataset_kinds.py`` walks every entry).

Builders are named as ``"function"`` in ``webapp.datasets.services.build`` and looked up when a build runs:
the build module reads this table, so it is not imported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from nlac_core.formats.dataset_exports import SFT_FORMATS, TRAJECTORY_FORMATS
from webapp.jobs.kinds import taking

BUILDERS = "webapp.datasets.services.build"


@dataclass(frozen=True)
class DatasetKind:
    name: str
    label: str
    builder: str  # a function of BUILDERS: (key, step, candidates, spec, policy) -> records ("": whole trajectories)
    sources: tuple[str, ...] = ()  # the candidate sets it reads per step (``build.SOURCES``)
    optional_sources: tuple[tuple[str, str], ...] = ()  # (candidate set, the spec option that turns it on)
    runtime: bool = False  # corrections of a runtime critic's checks (about proposals) count for it
    options: tuple[str, ...] = ()  # the DatasetSpec options that apply to it (the filter and the splits always do)
    export_formats: tuple[str, ...] = SFT_FORMATS

    @property
    def per_step(self) -> bool:
        """One record (or a few) per selected step; else one per trajectory."""
        return bool(self.builder)

    def sources_for(self, spec) -> list[str]:
        """The candidate sets a build of this spec reads."""
        return [*self.sources, *(source for source, option in self.optional_sources if getattr(spec, option))]

    def build(self, key: tuple[int, int], step, candidates: dict[str, Any], spec, policy: str) -> list:
        made = getattr(import_module(BUILDERS), self.builder)(key, step, candidates, spec, policy)
        return [made] if isinstance(made, tuple) else list(made or [])

    def trained_by(self) -> str | None:
        return taking(self.name, trains=True)

    def evaluated_by(self) -> str | None:
        return taking(self.name, trains=False)


_ENTRIES = (
    DatasetKind("critic_targets", "critic targets", "critic_target", sources=("gold", "bellman"),
                optional_sources=(("submitted", "include_submitted"), ("model_critique", "include_model_critiques")),
                options=("include_submitted", "include_model_critiques", "human_only")),
    DatasetKind("successor_targets", "successor targets", "successor_target", sources=("bellman",)),
    DatasetKind("distillation", "distillation", "distillation", sources=("gold", "model_critique", "refinement"),
                options=("only_human_accepted", "only_changed", "skip_optimal")),
    DatasetKind("runtime_critic", "runtime critic", "runtime_critic", sources=("gold", "label"), runtime=True,
                optional_sources=(("submitted", "include_submitted"), ("runtime", "include_model_critiques"),
                                  ("model_critique", "include_model_critiques")),
                options=("include_submitted", "include_model_critiques")),
    DatasetKind("trajectories", "trajectories", "", export_formats=TRAJECTORY_FORMATS),
)

DATASET_KINDS: dict[str, DatasetKind] = {k.name: k for k in _ENTRIES}
KINDS = tuple(DATASET_KINDS)
KIND_LABELS = {k.name: k.label for k in _ENTRIES}
