"""The bootstrap cell, run for real in a fresh virtual environment that has no helpers.

Colab and a bare Jupyter have torch and friends but not this book's package; the first
cell of every chapter installs it from the repository. Here the cell runs in a new venv
whose only packages are the book's third-party dependencies (linked in, without helpers),
with ``HELPERS_SOURCE`` pointing at this local checkout instead of the remote repository.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "tools"))
import bootstrap  # noqa: E402

OWN = ("helpers", "attention_book_helpers", "__editable__")


def _deps_only_dir(tmp_path: Path) -> Path:
    """A folder of links to every installed package except the book's own helpers."""
    site = Path(sysconfig.get_paths()["purelib"])
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith(OWN) or entry.suffix == ".pth":
            continue
        (deps / entry.name).symlink_to(entry)
    return deps


def _checkout_copy(tmp_path: Path) -> Path:
    """The files pip needs from this checkout, copied so that building leaves no trace."""
    source = tmp_path / "checkout"
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    return source


@pytest.mark.slow
def test_bootstrap_cell_installs_helpers_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    fresh_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(fresh_site) / "book_deps.pth").write_text(str(_deps_only_dir(tmp_path)) + "\n")
    source = _checkout_copy(tmp_path)
    env = {**os.environ, "HELPERS_SOURCE": str(source), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)

    before = subprocess.run([python, "-c", "import helpers"], capture_output=True, env=env)
    assert before.returncode != 0, "the fresh venv must start without helpers"

    cell = bootstrap.cell_source()
    run = subprocess.run(
        [python, "-c", cell], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert run.returncode == 0, f"the bootstrap cell failed:\n{run.stdout}\n{run.stderr}"
    assert re.fullmatch(r"Installed attention-book-helpers [^\n]* in \d+ s\.\n", run.stdout), (
        f"the bootstrap cell must say in one line what it installed: {run.stdout!r}"
    )

    check = subprocess.run(
        [
            python,
            "-c",
            "import helpers, helpers.figures.widgets, helpers.kernels; print(helpers.__file__)",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip().startswith(fresh_site), (
        f"helpers should be installed into the fresh venv, imported from {check.stdout}"
    )

    again = subprocess.run(
        [python, "-c", cell], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert again.returncode == 0 and "pip" not in again.stdout + again.stderr, (
        "a second run must be a no-op once helpers is importable"
    )


# The cell's two ways of refusing, shown with hand-made wheels in a fresh venv (no network):
# a pinned preinstalled package pip would have to replace, and an imported one it replaced.


def _wheel(
    folder: Path, name: str, version: str, requires: tuple[str, ...] = (), module: str | None = None
) -> Path:
    import base64
    import hashlib
    import zipfile

    module = module or name
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": "".join(
            [
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                *(f"Requires-Dist: {r}\n" for r in requires),
            ]
        ),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


@pytest.fixture
def offline_venv(tmp_path):
    """A fresh venv (its own bundled pip) that installs only from ``tmp_path / 'wheels'``."""
    venv, wheels = tmp_path / "venv", tmp_path / "wheels"
    wheels.mkdir()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("PYTHONPATH", None)
    python = venv / "bin" / "python"

    def preinstall(wheel: Path):
        subprocess.run(
            [python, "-m", "pip", "install", "--quiet", str(wheel)],
            check=True,
            env=env,
            capture_output=True,
        )

    return python, wheels, env, preinstall


def _run_cell(python: Path, env: dict, source: Path, before: str = ""):
    cell = before + bootstrap.cell_source()
    return subprocess.run(
        [python, "-c", cell],
        capture_output=True,
        text=True,
        env={**env, "HELPERS_SOURCE": str(source)},
        timeout=300,
    )


@pytest.mark.slow
def test_bootstrap_cell_asks_for_a_restart_when_pip_replaces_an_imported_package(offline_venv):
    python, wheels, env, preinstall = offline_venv
    preinstall(_wheel(wheels, "oldlib", "1.0"))
    _wheel(wheels, "oldlib", "2.0")
    helpers = _wheel(wheels, "attention-book-helpers", "9.0", ("oldlib>=2",), module="helpers")

    run = _run_cell(python, env, helpers, before="import oldlib\n")
    assert run.returncode == 1
    assert "Installed attention-book-helpers 9.0, oldlib 2.0 in" in run.stdout
    assert run.stderr.strip().splitlines()[-1] == (
        "pip replaced oldlib, already imported here: restart the kernel "
        "(Colab: Runtime > Restart session), then run all cells."
    )


@pytest.mark.slow
def test_bootstrap_cell_upgrades_a_package_nobody_imported_without_fuss(offline_venv):
    python, wheels, env, preinstall = offline_venv
    preinstall(_wheel(wheels, "oldlib", "1.0"))
    _wheel(wheels, "oldlib", "2.0")
    helpers = _wheel(wheels, "attention-book-helpers", "9.0", ("oldlib>=2",), module="helpers")

    run = _run_cell(python, env, helpers)
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(
        r"Installed attention-book-helpers 9\.0, oldlib 2\.0 in \d+ s\.\n", run.stdout
    )


@pytest.mark.slow
def test_bootstrap_cell_never_replaces_a_preinstalled_platform_package(offline_venv):
    """A platform package (here a stand-in tqdm 1.0) is pinned: pip fails, the cell says why."""
    python, wheels, env, preinstall = offline_venv
    preinstall(_wheel(wheels, "tqdm", "1.0"))
    _wheel(wheels, "tqdm", "9.0")
    helpers = _wheel(wheels, "attention-book-helpers", "9.0", ("tqdm>=2",), module="helpers")

    run = _run_cell(python, env, helpers)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith(
        "Could not install the book's helpers: a version conflict with what is preinstalled "
        "here (tqdm==1.0).\nTo do: run the book in a fresh environment"
    ), run.stderr
    assert "conflicting dependencies" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr, "one short message, not a traceback"
    check = subprocess.run(
        [python, "-c", "import tqdm; print(tqdm.__version__)"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert check.stdout.strip() == "1.0"
