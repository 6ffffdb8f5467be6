"""Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one username from one address,
that pair is refused, even with the right password, with a page that says why, until the cool-off has passed
or an admin resets it. Other addresses and other users are not affected."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

from webapp.login_throttle import client_ip


def log_in(client, username: str, password: str, ip: str = "10.0.0.7"):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip)


def fail_until_locked(client, username: str = "annotator"):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = log_in(client, username, "wrong-password")
    return response


def test_it_locks_out_a_username_and_address_after_repeated_failures(client, personas):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert log_in(client, "annotator", "wrong-password").status_code == 200  # the form again, with its error

    locked = log_in(client, "annotator", "wrong-password")
    right_password = log_in(client, "annotator", "annotator-pw-123")

    assert locked.status_code == 429
    assert right_password.status_code == 429
    text = right_password.content.decode()
    assert "Too many failed logins for “annotator” from this address" in text
    assert "axes_reset_username annotator" in text
    assert "_auth_user_id" not in client.session


def test_it_keeps_other_addresses_and_users_logging_in(client, personas):
    fail_until_locked(client)

    assert log_in(client, "annotator", "annotator-pw-123", ip="10.0.0.8").status_code == 302
    client.logout()
    assert log_in(client, "reviewer", "reviewer-pw-123").status_code == 302


def test_it_lets_the_lockout_expire(client, personas, settings):
    fail_until_locked(client)
    from axes.models import AccessAttempt

    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - settings.AXES_COOLOFF_TIME
                                 - timedelta(seconds=1))

    assert log_in(client, "annotator", "annotator-pw-123").status_code == 302


def test_it_is_lifted_by_an_admin_command(client, personas):
    fail_until_locked(client)
    assert log_in(client, "annotator", "annotator-pw-123").status_code == 429

    call_command("axes_reset_username", "annotator", verbosity=0)

    assert log_in(client, "annotator", "annotator-pw-123").status_code == 302


def test_it_counts_the_client_behind_the_tls_proxy_not_the_proxy(rf, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    request = rf.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.9")

    assert client_ip(request) == "203.0.113.9"  # what our proxy appended; 1.2.3.4 is what the client claimed
    settings.SECURE_PROXY_SSL_HEADER = None
    assert client_ip(request) == "127.0.0.1"  # without a proxy the header is the client's to forge
