"""The committed src/tocsin/_models.py is what scripts/generate.py makes
from the running service's /openapi.json: a changed field, enum or route
fails here until the models are regenerated (and, through the operation
tables, until the methods take it: tests/unit/test_signatures.py)."""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from types import ModuleType

from .conftest import PACKAGE_ROOT, Ingest


def generator() -> ModuleType:
    path = PACKAGE_ROOT / "scripts" / "generate.py"
    spec = importlib.util.spec_from_file_location("tocsin_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_models_match_the_services_openapi_document(ingest: Ingest) -> None:
    with urllib.request.urlopen(f"{ingest.base_url}/openapi.json", timeout=10) as answer:
        document = json.load(answer)
    assert str(document["openapi"]).startswith("3.1.")
    gen = generator()
    committed = gen.OUTPUT.read_text(encoding="utf-8")
    generated = gen.Generator(document).render()
    assert committed == generated, (
        f"{gen.OUTPUT} is out of date with the service: run "
        "`python scripts/generate.py http://127.0.0.1:8080/openapi.json` and commit it"
    )


def test_every_public_v1_operation_is_in_the_tables(ingest: Ingest) -> None:
    from tocsin._models import OPERATIONS

    with urllib.request.urlopen(f"{ingest.base_url}/openapi.json", timeout=10) as answer:
        document = json.load(answer)
    documented = {
        op["operationId"]
        for path, item in document["paths"].items()
        if path.startswith("/v1/")
        for op in item.values()
    }
    assert documented == set(OPERATIONS)
