"""What the client tests share: the Colab-like venv, a copy of the checkout, Chromium, servers.

The Colab-like venv (``.venv-colab``, built by ``make client-envs`` from
``tests/clients/colab.txt``) holds Colab's published package versions and the classic
Notebook 6.5 front end, and never the helpers until a bootstrap cell installs them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLAB_VENV = ROOT / ".venv-colab"
COLAB_PYTHON = COLAB_VENV / "bin" / "python"
SHOTS = ROOT / "_build" / "screenshots" / "clients"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def unavailable(reason: str):
    """Skip outside CI; under CI=true a missing environment or browser is a failure."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing client environment is a failure)")
    pytest.skip(reason)


def require_colab_venv() -> Path:
    if not (COLAB_VENV / ".installed").is_file():
        unavailable(f"no Colab-like venv at {COLAB_VENV}: run `make client-envs`")
    return COLAB_PYTHON


@contextlib.contextmanager
def colab_venv_lock():
    """Hold the Colab-like venv alone: tests that uninstall and reinstall the helpers in it
    may run in parallel pytest-xdist workers, and must not interleave."""
    COLAB_VENV.mkdir(exist_ok=True)
    with open(COLAB_VENV / ".test-lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def checkout_copy(dest: Path) -> Path:
    """The files pip needs to install the helpers from this checkout, copied to ``dest``
    (building in place would leave build files in the working tree)."""
    shutil.copytree(
        ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyter_server(
    argv: list[str], *, cwd: Path, env: dict, port: int, log: Path, timeout: float = 90
):
    """Start a Jupyter server (``argv`` must bind 127.0.0.1:``port``); yield its base URL."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the server exited:\n{log.read_text()[-3000:]}")
                try:
                    urllib.request.urlopen(url + "/api", timeout=2).read()
                    break
                except OSError as error:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"no server after {timeout} s:\n{log.read_text()[-3000:]}"
                        ) from error
                    time.sleep(0.5)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)


@contextlib.contextmanager
def chromium():
    """Debian's Chromium through playwright (never ``playwright install``)."""
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} not found: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def offline_page(browser, *, width: int = 1280, height: int = 900):
    """A new page whose requests beyond 127.0.0.1 are refused and recorded; console errors
    and the texts of every console message are recorded too. Returns (page, external, console)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    external, console = [], []

    def route(request_route):
        target = request_route.request.url
        if target.startswith(("http://127.0.0.1:", "ws://127.0.0.1:", "data:", "blob:")):
            request_route.continue_()
        else:
            external.append(target)
            request_route.abort()

    page.route("**/*", route)
    page.on("console", lambda m: console.append((m.type, m.text)))
    page.on("pageerror", lambda e: console.append(("error", f"uncaught: {e}")))
    return page, external, console
