"""The OpenAI-compatible endpoints jobs may call: a list the admin configures, never a URL a job carries.

A worker sends its API key to the endpoint a job runs on, so the address and the key are not the job's to
choose: a researcher names one of the endpoints in ``NLAC_OPENAI_ENDPOINTS`` and the worker looks its base
URL and key variable up here when it runs the job. The setting is a dict (name -> {"base_url", "key_env"}) or,
from the environment, a string of entries separated by commas, each ``NAME BASE_URL [KEY_VARIABLE]``::

    NLAC_OPENAI_ENDPOINTS=openai https://api.openai.com/v1 OPENAI_API_KEY, lab-vllm http://10.0.0.5:8001/v1

An entry without a key variable gets no key (a local server); a key variable unset on the worker fails the
job rather than calling the endpoint without the key it expects.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
KEY_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SETTING = "NLAC_OPENAI_ENDPOINTS"


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    key_env: str = ""  # the worker's environment variable holding the key ("": send none)

    def api_key(self) -> str:
        """The key to send, read on the worker when the job runs (so a key never sits in the database)."""
        if not self.key_env:
            return "EMPTY"  # the client insists on a key; a local server ignores it
        key = os.environ.get(self.key_env, "")
        if not key:
            raise EndpointError(f"endpoint {self.name!r}: its key variable {self.key_env} is not set on this worker")
        return key


class EndpointError(RuntimeError):
    """A configured endpoint that cannot be used on this worker (its key is missing)."""


def _entry(where: str, name: str, spec: dict) -> Endpoint:
    if not NAME.match(name):
        raise ImproperlyConfigured(f"{SETTING}, {where}: the name {name!r} must be 1-64 letters, digits, '.', '_' "
                                   "or '-'")
    base_url = str(spec.get("base_url", "")).rstrip("/")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(f"{SETTING}, {where}: expected an http(s) base URL, got {base_url!r}")
    if parts.username or parts.password:
        raise ImproperlyConfigured(f"{SETTING}, {where}: put the key in a variable, not in the URL")
    key_env = str(spec.get("key_env") or "")
    if key_env and not KEY_VARIABLE.match(key_env):
        raise ImproperlyConfigured(f"{SETTING}, {where}: {key_env!r} is not an environment variable name")
    unknown = sorted(set(spec) - {"base_url", "key_env"})
    if unknown:
        raise ImproperlyConfigured(f"{SETTING}, {where}: unknown setting {unknown[0]!r} (known: base_url, key_env)")
    return Endpoint(name, base_url, key_env)


def parse(value: str | dict | None) -> dict[str, Endpoint]:
    """The setting as endpoints by name; ImproperlyConfigured names the bad entry."""
    if not value:
        return {}
    if isinstance(value, dict):
        return {name: _entry(f"endpoint {name!r}", name, dict(spec)) for name, spec in value.items()}
    endpoints: dict[str, Endpoint] = {}
    for n, raw in enumerate(str(value).split(","), start=1):
        words = raw.split()
        if not words:
            continue
        if len(words) not in (2, 3):
            raise ImproperlyConfigured(f"{SETTING}, entry {n} ({raw.strip()!r}): expected NAME BASE_URL "
                                       "[KEY_VARIABLE]")
        if words[0] in endpoints:
            raise ImproperlyConfigured(f"{SETTING}, entry {n}: the name {words[0]!r} is used twice")
        spec = {"base_url": words[1], "key_env": words[2] if len(words) == 3 else ""}
        endpoints[words[0]] = _entry(f"entry {n}", words[0], spec)
    return endpoints


def configured() -> dict[str, Endpoint]:
    return parse(getattr(settings, SETTING, None))


def names() -> list[str]:
    return sorted(configured())
