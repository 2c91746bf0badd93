"""The files a published project has: workflows that lint clean, a valid CITATION.cff, a
LICENSE that matches pyproject.toml, and `make set-repo` rewriting the repository URL."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from clients.common import unavailable

ROOT = Path(__file__).resolve().parents[1]
LINT_BIN = ROOT / ".venv-lint" / "bin"
sys.path.insert(0, str(ROOT / "book" / "tools"))
import bootstrap  # noqa: E402

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _linter(name: str) -> Path:
    tool = LINT_BIN / name
    if not tool.exists():
        unavailable(f"{tool} missing: run `make lint-envs`")
    return tool


def test_there_are_test_and_pages_workflows():
    assert [w.name for w in WORKFLOWS] == ["pages.yml", "test.yml"]
    for workflow in WORKFLOWS:
        for line in workflow.read_text().splitlines():
            if "uses:" in line:  # every action pinned to a full commit SHA, version noted
                ref = line.split("uses:")[1].split("#")[0].strip()
                if ref.startswith("$/.github/workflows/"):  # this repository's own workflow
                    assert (ROOT / ref[2:]).is_file(), line
                    continue
                assert "@" in ref and len(ref.split("@")[1]) == 40, line
                assert "# v" in line, f"say which version the SHA is: {line}"


def test_pages_publish_only_after_the_tests_pass():
    """pages.yml runs only when test.yml calls it, and test.yml calls it only after every
    test job passed, on a push to main."""
    pages = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    test = (ROOT / ".github" / "workflows" / "test.yml").read_text()
    trigger = pages.split("\non:\n", 1)[1].split("\n\n", 1)[0]
    assert trigger.strip() == "workflow_call:", f"pages.yml has other triggers: {trigger}"
    publish = test.split("\n  publish:\n", 1)[1]
    jobs = [
        line[2:-1]
        for line in test.split("\njobs:\n", 1)[1].splitlines()
        if line.startswith("  ") and not line.startswith("   ") and line.endswith(":")
    ]
    needs = publish.split("needs: [", 1)[1].split("]", 1)[0].split(", ")
    assert sorted(needs) == sorted(j for j in jobs if j != "publish"), (needs, jobs)
    assert "github.ref == 'refs/heads/main'" in publish


def test_every_test_file_runs_in_a_workflow_job():
    """`make test` runs tests/ whole; the workflow splits it into jobs: `make unit` (the tests
    marked unit), `make nbval`, `make test-site` and `make test-clients` (their file lists).
    A file none of them runs would pass `make test` and never run on GitHub."""
    import re

    import conftest

    make = (ROOT / "Makefile").read_text()

    def listed(name: str) -> set[str]:
        block = re.search(rf"^{name} :=((?:.*\\\n)*.*)$", make, re.M).group(1)
        return set(re.findall(r"tests/test_\w+\.py", block))

    nbval = re.search(r"^nbval:.*\n(?:\t.*\n)+", make, re.M).group(0)
    jobs = (
        listed("SITE_TESTS")
        | listed("CLIENT_TESTS")
        | set(re.findall(r"tests/test_\w+\.py", nbval))
    )
    marked = re.compile(r"^pytestmark = pytest\.mark\.(book|browser|slow)\b", re.M)
    missing = [
        f"tests/{path.name}"
        for path in sorted((ROOT / "tests").glob("test_*.py"))
        if (path.name in conftest.BOOK_FILES or marked.search(path.read_text(encoding="utf-8")))
        and f"tests/{path.name}" not in jobs
    ]
    assert not missing, (
        f"not run by any workflow job (add to SITE_TESTS or CLIENT_TESTS): {missing}"
    )


def test_workflows_pass_actionlint():
    run = subprocess.run(
        [_linter("actionlint"), *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=ROOT
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_workflows_pass_zizmor():
    run = subprocess.run(
        [_linter("zizmor"), "--offline", "--no-progress", str(ROOT / ".github" / "workflows")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_citation_cff_is_valid_and_points_at_the_repository():
    run = subprocess.run(
        [_linter("cffconvert"), "--validate", "-i", "CITATION.cff"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    text = (ROOT / "CITATION.cff").read_text()
    assert f'repository-code: "{bootstrap.repository_url()}"' in text


def test_license_matches_pyproject():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_changelog_has_an_unreleased_section():
    assert "\n## Unreleased\n" in (ROOT / "CHANGELOG.md").read_text()


@pytest.fixture
def tree(tmp_path):
    """The files `make set-repo` rewrites, copied so the real ones are never touched."""
    for name in ("_config.yml", "CITATION.cff"):
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(
        ROOT / "chapters",
        tmp_path / "chapters",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints"),
    )
    (tmp_path / "book").mkdir()
    shutil.copy2(ROOT / "book" / "intro.ipynb", tmp_path / "book" / "intro.ipynb")
    return tmp_path


def test_set_repository_rewrites_config_citation_and_every_bootstrap_cell(tree):
    url = "https://github.com/someone/attention-fork"
    changed = bootstrap.set_repository(url + ".git", root=tree)
    assert changed[:2] == ["_config.yml", "CITATION.cff"]
    assert len(changed) == 2 + len(bootstrap.chapters(tree))
    assert bootstrap.repository_url(tree / "_config.yml") == url
    assert f'repository-code: "{url}"' in (tree / "CITATION.cff").read_text()
    assert bootstrap.check_cells(tree) == []
    first = json.loads((tree / "chapters" / "04_masking.ipynb").read_text())["cells"][0]
    assert f'BOOK_REPOSITORY = "{url}"' in "".join(first["source"])
    assert bootstrap.set_repository(url, root=tree)[2:] == []  # a second run changes no cell


@pytest.mark.parametrize(
    "bad",
    [
        "http://github.com/a/b",
        "https://gitlab.com/a/b",
        "https://github.com/a",
        "github.com/a/b",
        "https://github.com/a/b c",
    ],
)
def test_set_repository_refuses_what_is_not_a_github_repository(tree, bad):
    before = (tree / "_config.yml").read_text()
    with pytest.raises(ValueError, match="https://github.com/OWNER/REPO"):
        bootstrap.set_repository(bad, root=tree)
    assert (tree / "_config.yml").read_text() == before


def test_ruff_lints_and_formats_clean():
    """The library, tests, benchmarks and build tools pass `ruff check` and `ruff format
    --check` (configuration in pyproject.toml; pre-commit runs the same)."""
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        unavailable(f"{ruff} missing: make book installs it from requirements.txt")
    for args in (["check", "--no-fix"], ["format", "--check"]):
        run = subprocess.run([ruff, *args], capture_output=True, text=True, cwd=ROOT)
        assert run.returncode == 0, f"ruff {' '.join(args)}:\n{run.stdout}{run.stderr}"


def test_pre_commit_uses_the_pinned_ruff():
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    pins = dict(
        line.split("==")
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert f"rev: v{pins['ruff']}" in config, "pre-commit's ruff differs from requirements.txt"
