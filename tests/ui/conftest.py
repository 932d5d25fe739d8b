"""Browser tests: the UIs a user opens (kedro-viz, the MLflow UI), in headless Chromium.

Playwright for Python drives Debian's ``chromium`` package (Playwright's own browser download
is not used). Servers listen on 127.0.0.1 on a free port, run in their own process group and
are killed as a group. Without Chromium (or Playwright) the tests skip, saying why; CI
(``.ci/run``) installs ``chromium`` first.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The machine may be shared and slow: generous waits, never sleeps in the assertions.
UI_TIMEOUT_MS = 180_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(
    command: Sequence[str],
    health_url: str,
    log: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 600,
) -> Iterator[subprocess.Popen]:
    """Run a server in its own process group until ``health_url`` answers; kill the group."""
    with log.open("w") as out:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"{command[0]} exited with {process.returncode}: {log.read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(health_url, timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"{health_url} did not answer in {timeout_s} s: {log.read_text()[-2000:]}"
                    )
                time.sleep(0.5)
        yield process
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@pytest.fixture()
def browser_page(tmp_path: Path):
    """A page of a fresh headless Chromium (its own user-data dir), or a skip saying why."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("no Chromium: install Debian's package (apt-get install -y chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="Playwright for Python is not installed (pip install playwright)",
    )
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            yield page
        finally:
            context.close()
