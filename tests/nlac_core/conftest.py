"""Fixtures for model tests: the embedded model, converted once, loaded once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def embedded_model_dir():
    """The converted embedded SmolLM2 directory (converted on first use under NLAC_MODEL_DIR or var/models)."""
    from nlac_core.backends.embedded import ensure_embedded_model

    return ensure_embedded_model()


@pytest.fixture(scope="session")
def embedded_backend(embedded_model_dir):
    """One HFBackend on the embedded model, shared by every test that needs the real model."""
    from nlac_core.backends.hf import HFBackend

    return HFBackend(model=str(embedded_model_dir))
