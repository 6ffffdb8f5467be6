"""Production settings: `manage.py check --deploy` passes with the environment of deploy/env.example (it warned
about HSTS, the SSL redirect and the session and CSRF cookies), while `make run` and the tests keep plain http."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def production_env(tmp_path: Path) -> dict[str, str]:
    """deploy/env.example as a unit's EnvironmentFile gives it, with a real secret, and local paths and a local
    database in place of the example's hosts (check --deploy connects to neither)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    for line in (ROOT / "deploy" / "env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    env.update(SECRET_KEY=secrets.token_urlsafe(60), NLAC_VAR_DIR=str(tmp_path),
               DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", DJANGO_SETTINGS_MODULE="webapp.settings")
    return env


def test_it_passes_check_deploy_with_the_production_example(tmp_path):
    env = production_env(tmp_path)
    assert env["DEBUG"] == "false"

    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout
    assert "security.W" not in done.stdout + done.stderr


def test_it_serves_https_only_behind_the_proxy_in_production(tmp_path):
    """Plain http is redirected; a request the TLS proxy marks https gets HSTS and secure-only cookies."""
    script = textwrap.dedent("""
        import django; django.setup()
        from django.test import Client
        plain = Client().get("/login/", HTTP_HOST="studio.example.org")
        print("plain", plain.status_code, plain.get("Location"))
        tls = Client().get("/login/", HTTP_HOST="studio.example.org", HTTP_X_FORWARDED_PROTO="https")
        print("tls", tls.status_code, tls.get("Strict-Transport-Security"), tls.cookies["csrftoken"]["secure"])
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=production_env(tmp_path),
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert "plain 301 https://studio.example.org/login/" in done.stdout
    assert "tls 200 max-age=31536000; includeSubDomains; preload True" in done.stdout


def test_it_keeps_plain_http_for_make_run_and_the_tests(client):
    response = client.get("/login/")

    assert response.status_code == 200
    assert not settings.SECURE_SSL_REDIRECT and not settings.SESSION_COOKIE_SECURE
    assert not settings.CSRF_COOKIE_SECURE and settings.SECURE_HSTS_SECONDS == 0
    assert "Strict-Transport-Security" not in response
