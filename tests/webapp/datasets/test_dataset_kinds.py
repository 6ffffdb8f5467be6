"""The dataset-kind registry (``webapp.datasets.kinds``) walked entry by entry: a builder that does not resolve, a
candidate set the build cannot load, an option the spec does not have or a kind the model does not offer fails
here, not in a build job."""

from __future__ import annotations

from dataclasses import fields

import pytest

from webapp.datasets.kinds import DATASET_KINDS, KINDS
from webapp.datasets.models import Dataset
from webapp.datasets.services import build
from webapp.datasets.services.exports import formats_for
from webapp.datasets.services.specs import DatasetSpec, SpecError, check_kind
from webapp.jobs.kinds import JOB_KINDS


@pytest.mark.parametrize("name", KINDS)
def test_it_walks_one_dataset_kind(name):
    kind = DATASET_KINDS[name]
    assert check_kind(name) == name and kind.label
    if kind.per_step:
        assert callable(getattr(build, kind.builder))
    assert set(kind.sources) | {s for s, _ in kind.optional_sources} <= set(build.SOURCES)
    spec_fields = {f.name for f in fields(DatasetSpec)}
    assert set(kind.options) <= spec_fields and {o for _, o in kind.optional_sources} <= set(kind.options)
    assert formats_for(name) == kind.export_formats and kind.export_formats
    for job in (kind.trained_by(), kind.evaluated_by()):
        assert job is None or name in JOB_KINDS[job].dataset_kinds


def test_it_offers_exactly_the_registered_kinds():
    assert [value for value, _ in Dataset._meta.get_field("kind").choices] == list(KINDS)
    with pytest.raises(SpecError, match="expected one of critic_targets"):
        check_kind("poems")


def test_it_reads_an_optional_candidate_set_only_when_its_option_is_on():
    kind = DATASET_KINDS["critic_targets"]
    assert kind.sources_for(DatasetSpec()) == ["gold", "bellman"]
    assert kind.sources_for(DatasetSpec(include_submitted=True, include_model_critiques=True)) == [
        "gold", "bellman", "submitted", "model_critique"]
