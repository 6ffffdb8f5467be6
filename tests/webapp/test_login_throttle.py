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


def test_it_believes_x_forwarded_for_only_from_a_listed_proxy(client, personas, settings):
    """Behind the TLS proxy, the client's address is the last X-Forwarded-For entry; a client that reaches
    gunicorn directly cannot escape the lockout by sending a new X-Forwarded-For with every attempt."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.NLAC_TRUSTED_PROXIES = ["10.9.9.1"]
    user = personas["researcher"].username

    def attempt(remote, forwarded, password="wrong"):
        return client.post(reverse("login"), {"username": user, "password": password}, REMOTE_ADDR=remote,
                           HTTP_X_FORWARDED_FOR=forwarded, HTTP_X_FORWARDED_PROTO="https", secure=True)

    for n in range(settings.AXES_FAILURE_LIMIT):  # straight to gunicorn, a fresh forged address each time
        attempt("203.0.113.7", f"198.51.100.{n}")
    assert attempt("203.0.113.7", "198.51.100.99", "researcher-pw-123").status_code == 429  # counted by its own address
    for n in range(settings.AXES_FAILURE_LIMIT):  # through the proxy: the entry the proxy appended counts
        attempt("10.9.9.1", f"192.0.2.1, 198.51.100.{n}")
    # each forwarded client has its own count: one failure is no lockout
    assert attempt("10.9.9.1", "192.0.2.50, 198.51.100.1", "researcher-pw-123").status_code == 302
