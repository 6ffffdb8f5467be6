"""Backends are found by name, and only the one asked for is imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nlac_core.backends import BackendError, get_backend
from nlac_core.backends.fake import FakeBackend
from tests.conftest import ROOT


def test_it_names_the_known_backends_when_asked_for_an_unknown_one():
    with pytest.raises(BackendError, match=r"unknown backend 'llamacpp'; known: fake, hf, openai, vllm"):
        get_backend("llamacpp", model="x")


def test_it_builds_a_backend_by_name():
    backend = get_backend("fake", model="m")
    assert isinstance(backend, FakeBackend) and backend.model == "m"


def test_it_imports_no_model_library_until_a_backend_is_asked_for():
    code = (
        "import sys\n"
        "import nlac_core.backends, nlac_core.backends.vllm_backend, nlac_core.serve, nlac_core.commands.models\n"
        "from nlac_core.backends import get_backend\n"
        "get_backend('fake')\n"
        "bad = [m for m in ('torch', 'transformers', 'vllm', 'openai') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "get_backend('openai', model='m', base_url='http://127.0.0.1:9/v1')\n"
        "assert 'openai' in sys.modules\n"
        "bad = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_it_says_vllm_is_missing_instead_of_failing_on_import():
    code = (
        "import importlib.util, sys\n"
        "if importlib.util.find_spec('vllm'): sys.exit(0)\n"
        "from nlac_core.backends import BackendError, get_backend\n"
        "try:\n"
        "    get_backend('vllm', model='/nowhere')\n"
        "except BackendError as exc:\n"
        "    assert 'needs vllm' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
