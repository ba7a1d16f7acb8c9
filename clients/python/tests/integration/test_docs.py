"""The docs' examples work as written, against the real service, with the
package as a user installs it (scripts/test runs these from a fresh venv
where the built wheel is installed)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Dict, Iterator

import pytest

import tocsin

from .conftest import PACKAGE_ROOT, Ingest, ingest_binary


@pytest.fixture
def fresh() -> Iterator[Ingest]:
    """A server of its own: the example's event is then the only one."""
    server = Ingest(ingest_binary())
    try:
        yield server
    finally:
        server.stop()


def first_block(path: Path, language: str) -> str:
    match = re.search(rf"```{language}\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    assert match, f"{path.name} has no {language} example"
    return match.group(1)


def user_env(ingest: Ingest, key: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOCSIN_", "INGEST_"))}
    # `python3` in a shell example is the interpreter the package is installed in.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(TOCSIN_API_KEY=key, TOCSIN_BASE_URL=ingest.base_url)
    return env


def test_the_readmes_first_example_works_as_written(fresh: Ingest) -> None:
    ingest = fresh
    key = ingest.create_key()
    code = first_block(PACKAGE_ROOT / "README.md", "python")
    with tempfile.TemporaryDirectory() as cwd:  # away from src/: the installed package
        done = subprocess.run(
            [sys.executable, "-c", code], env=user_env(ingest, key), cwd=cwd,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with tocsin.Tocsin(key, base_url=ingest.base_url) as client:
        recorded = client.events.list().data.items
    assert [(e.channel_name, e.title, e.user_id) for e in recorded] == [("payments", "Payment failed", "user_7")]
    assert str(recorded[0].id) in done.stdout, "the example prints the event id"


def test_the_shell_and_cron_note_works_as_written(fresh: Ingest) -> None:
    ingest = fresh
    key = ingest.create_key()
    script = first_block(PACKAGE_ROOT / "shell-and-cron.md", "sh")
    for run in ("first", "rerun"):
        with tempfile.TemporaryDirectory() as cwd:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script], env=user_env(ingest, key), cwd=cwd,
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        assert done.returncode == 0, f"{run}: {done.stderr}"
    with tocsin.Tocsin(key, base_url=ingest.base_url) as client:
        events = client.events.list().data.items
    assert [(e.channel_name, e.title) for e in events] == [("backups", "Backup done")], "a rerun replays"


def test_the_tests_use_the_installed_wheel_when_scripts_test_runs_them() -> None:
    if os.environ.get("TOCSIN_TEST_INSTALLED") != "1":
        pytest.skip("run outside scripts/test, against whatever `tocsin` is importable")
    package = Path(tocsin.__file__).parent
    assert "site-packages" in package.parts, package
    assert (package / "py.typed").is_file(), "the wheel ships py.typed"


def test_every_python_sample_of_the_docs_page_runs(fresh: Ingest, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = fresh
    """The /docs page's `tocsin (Python)` samples (ingest/src/openapi/
    code_samples.rs) run as a reader would paste them, on a server of their
    own: a wrong keyword or method is a TypeError or AttributeError here, a
    value the service refuses a ValidationError. Only two refusals are the
    sample's due: a 404 (the example id names nothing here; this server has
    no Web Push key) and the admin routes' 401 (an API key is no admin
    token)."""
    with urllib.request.urlopen(f"{ingest.base_url}/openapi.json", timeout=10) as answer:
        document = json.load(answer)
    monkeypatch.setenv("TOCSIN_API_KEY", ingest.create_key())
    ran = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            samples = [s for s in operation.get("x-codeSamples", []) if s["label"] == "tocsin (Python)"]
            assert len(samples) == 1, f"{method} {path} has no Python sample"
            source = samples[0]["source"].replace("http://127.0.0.1:8080", ingest.base_url)
            code = compile(source, f"<sample {method} {path}>", "exec")
            if operation["operationId"] == "streamEvents":
                continue  # it follows the stream forever; compiled is enough
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    exec(code, {})
                except (tocsin.NotFoundError, tocsin.AuthenticationError) as refused:
                    admin = path.startswith("/admin/")
                    assert admin or isinstance(refused, tocsin.NotFoundError), f"{method} {path}: {refused}"
            ran += 1
    assert ran >= 10
