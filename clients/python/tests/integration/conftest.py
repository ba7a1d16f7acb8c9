"""A real ingest process for the integration tests: embedded mode (SQLite in
a temporary directory) on a free 127.0.0.1 port, API keys made with its
`keys create` command, as the TypeScript client's tests do.

INGEST_BIN names the binary (default: the workspace's target/debug/ingest).
Without it the tests fail; they never skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

#: What the session's ingest serves at GET /v1/webpush/key (a made-up key:
#: nothing is pushed, and the notifier has no private key to push with).
VAPID_PUBLIC_KEY = "BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3qBUYIHBQFLXYp5Nksh8U"

REPO_ROOT = Path(__file__).resolve().parents[4]
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def ingest_binary() -> Path:
    path = Path(os.environ.get("INGEST_BIN") or REPO_ROOT / "target" / "debug" / "ingest").resolve()
    if not path.is_file():
        raise RuntimeError(
            f"ingest binary not found at {path}. Build it (`cargo build --workspace --bins` in the "
            "repository root) or set INGEST_BIN. The integration tests need a real ingest "
            "and do not skip without one."
        )
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Ingest:
    """One ingest process and what the tests need from it."""

    def __init__(self, bin_path: Path, settings: Optional[Dict[str, str]] = None) -> None:
        self.bin = bin_path
        self.data_dir = tempfile.mkdtemp(prefix="tocsin-py-ingest-")
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        # ingest refuses unknown INGEST_* variables, and a setting left in
        # the caller's shell must not turn this embedded server into another.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
        self.env.update(settings or {})
        self.env.update(INGEST_LISTEN=f"127.0.0.1:{self.port}", INGEST_DATA_DIR=self.data_dir)
        self.log_path = Path(self.data_dir) / "ingest.log"
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.start()

    def start(self) -> None:
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen([str(self.bin)], env=self.env, stdout=log, stderr=log)
        log.close()
        self.wait_healthy()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-20_000:]

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"ingest exited before it was healthy. Its output:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        return
                    last = f"status {answer.status}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.1)
        raise RuntimeError(f"{self.base_url}/healthz did not answer 200 ({last}):\n{self.log()}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        """A new process on the same port and data: open connections drop,
        stored events stay."""
        self.kill()
        self.start()

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def create_key(self, *, scopes: Optional[Sequence[str]] = None, rate_limit: Optional[int] = None) -> str:
        """`ingest keys create`, sharing the server's data dir. Every scope by default."""
        args: List[str] = [str(self.bin), "keys", "create", "--org", "o", "--project", "p"]
        if scopes is not None:
            args += ["--scopes", ",".join(scopes)]
        if rate_limit is not None:
            args += ["--rate-limit", str(rate_limit)]
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(args[1:])}` failed: {done.stderr}")
        key = done.stdout.strip()
        assert key and not any(c.isspace() for c in key), f"printed {done.stdout!r}"
        return key


@pytest.fixture(scope="session")
def ingest() -> Iterator[Ingest]:
    server = Ingest(ingest_binary(), {"INGEST_VAPID_PUBLIC_KEY": VAPID_PUBLIC_KEY})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def api_key(ingest: Ingest) -> str:
    return ingest.create_key()
