"""Property-based fuzzing of the API from its own OpenAPI schema (schemathesis): for every operation, generated
requests, valid and not, with a researcher's token, against real data. No answer may be a 5xx, and no answer
may break the schema the API publishes."""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from ninja.responses import NinjaJSONEncoder
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from webapp.api.api import api

# The schema is the one /api/openapi.json serves; that URL needs a login, which collection time cannot have.
schema = schemathesis.openapi.from_dict(json.loads(json.dumps(api.get_openapi_schema(), cls=NinjaJSONEncoder)))
schema.app, schema.location = get_wsgi_application(), "/api/openapi.json"


@pytest.fixture
def token(project, personas):
    """A researcher's token, with a built snapshot and an export to find; the WSGI requests share the test's
    transaction (as Django's test client does, the request signals do not close its connection)."""
    from tests.webapp.datasets.conftest import build, make_dataset
    from webapp.api.tokens import do_create_token
    from webapp.datasets.models import Export

    snapshot = build(make_dataset(project, "trajectories"))
    Export.objects.create(snapshot=snapshot, format="jsonl")
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield do_create_token(personas["researcher"], "fuzz")[1]
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_it_never_errors_or_breaks_its_schema(case, token):
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"},
                           checks=[not_a_server_error, response_schema_conformance])
