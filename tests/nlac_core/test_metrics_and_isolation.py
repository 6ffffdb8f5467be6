import subprocess
import sys

import pytest

from nlac_core.metrics import pass_hat_k, pass_hat_ks
from tests.conftest import ROOT


def test_it_computes_pass_hat_k_as_tau_bench_defines_it():
    # one task always solved, one solved in 2 of 4 trials, one never
    outcomes = [(4, 4), (4, 2), (4, 0)]
    assert pass_hat_k(outcomes, 1) == pytest.approx((1 + 0.5 + 0) / 3)
    assert pass_hat_k(outcomes, 2) == pytest.approx((1 + 1 / 6 + 0) / 3)
    assert pass_hat_ks(outcomes)[4] == pytest.approx(1 / 3)
    assert pass_hat_k([(1, 1)], 2) is None  # a task with one trial says nothing about k=2


def test_it_never_imports_django_celery_torch_or_vllm():
    code = ("import sys, nlac_core, nlac_core.records, nlac_core.formats, nlac_core.metrics\n"
            "bad = [m for m in ('django', 'celery', 'torch', 'vllm', 'transformers') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_it_imports_every_core_module_without_django_vllm_or_a_model_library():
    """Algorithm, environments, training and CLI modules load torch, transformers, TRL
    and vLLM only when a model is used (the hf and vllm backends themselves excepted)."""
    code = (
        "import importlib, pkgutil, sys, nlac_core\n"
        "names = [m.name for m in pkgutil.walk_packages(nlac_core.__path__, 'nlac_core.')\n"
        "         if m.name not in ('nlac_core.__main__', 'nlac_core.backends.hf', 'nlac_core.backends.vllm_backend',\n"
        "                           'nlac_core.backends.openai_backend')\n"
        "         and not m.name.startswith('nlac_core.training.sft') and m.name != 'nlac_core.training.callback']\n"
        "for name in names: importlib.import_module(name)\n"
        "assert len(names) > 40, names\n"
        "bad = [m for m in ('django', 'celery', 'vllm', 'torch', 'transformers', 'trl', 'peft', 'openai')\n"
        "       if m in sys.modules]\n"
        "assert not bad, bad\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_it_starts_the_web_process_without_torch_or_transformers():
    code = ("import os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'webapp.settings'\n"
            "import django; django.setup()\n"
            "from django.urls import resolve; import webapp.wsgi; resolve('/trajectories/')\n"
            "bad = [m for m in ('torch', 'transformers', 'vllm', 'trl') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
