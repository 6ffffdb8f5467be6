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


def test_it_starts_the_web_process_without_torch_or_transformers():
    code = ("import os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'webapp.settings'\n"
            "import django; django.setup()\n"
            "from django.urls import resolve; import webapp.wsgi; resolve('/trajectories/')\n"
            "bad = [m for m in ('torch', 'transformers', 'vllm', 'trl') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
