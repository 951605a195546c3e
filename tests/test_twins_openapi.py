"""GET /api/2/openapi.json: a valid OpenAPI 3 document that lists exactly
the routes the binary serves."""

from __future__ import annotations

import re

import pytest
import requests
from openapi_spec_validator import validate

pytestmark = pytest.mark.ferry_only

# What each path parameter stands for in the probe requests: values that
# make a well-formed request, whatever the answer.
SAMPLES = {
    "thingId": "org.eclipse.ditto:probe",
    "policyId": "org.eclipse.ditto:probe",
    "importedPolicyId": "org.eclipse.ditto:imported",
    "attributePath": "location",
    "featureId": "lamp",
    "propertyPath": "on",
    "label": "DEFAULT",
    "subjectId": "nginx:ditto",
    "resourcePath": "thing:/",
    "messageSubject": "ask",
    "connectionId": "probe",
}


def test_the_document_is_valid_openapi_and_needs_no_credentials(broker):
    r = requests.get(f"http://{broker.host}:{broker.http_port}/api/2/openapi.json", timeout=10)
    assert r.status_code == 200
    document = r.json()
    validate(document)
    assert document["openapi"].startswith("3.")


def test_every_documented_route_and_method_is_served(broker):
    """A route the router does not have answers the listener's own 404
    (`not_found`) or 405 (`method_not_allowed`); a served one answers
    anything else, Ditto's errors included."""
    base = f"http://{broker.host}:{broker.http_port}"
    document = requests.get(f"{base}/api/2/openapi.json", timeout=10).json()
    probed = 0
    for template, item in document["paths"].items():
        path = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], template)
        for method in item:
            r = requests.request(method.upper(), base + path, json={}, timeout=10)
            body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            error = body.get("error") if isinstance(body, dict) else None
            assert error not in ("not_found", "method_not_allowed"), f"{method} {path}: {r.text}"
            probed += 1
    assert probed > 50
