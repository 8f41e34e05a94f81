"""docs/api.md's route table and the served OpenAPI document describe the same routes.

The OpenAPI document is checked against the router elsewhere (every served route is documented);
this closes the loop to the page people read.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.admin.openapi import openapi_document

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"
ROW = re.compile(r"^\| (GET|PUT|POST|PATCH|DELETE) \| (/\S*) \|", re.MULTILINE)


def test_every_documented_route_is_served_and_every_served_route_is_documented() -> None:
    documented = set(ROW.findall(API_MD.read_text()))
    served = {
        (method.upper(), path)
        for path, item in openapi_document()["paths"].items()
        for method in item
        if method != "parameters"
    }
    assert documented == served, {
        "documented, not served": sorted(documented - served),
        "served, not documented": sorted(served - documented),
    }
    assert len(served) >= 20
