"""The chapters in a Colab-like kernel: Colab's own package versions, no helpers installed.

Colab preinstalls ipywidgets 7.7.1 (and imports it when the kernel starts), torch, numpy
2.1.3, matplotlib 3.10.0, pillow 11.3.0, ... (``tests/clients/colab.txt``, from its published
pip freeze). A reader there opens a chapter and runs it: the bootstrap cell installs the
helpers from the repository, and every live figure must work with ipywidgets 7. Here
``HELPERS_SOURCE`` points the bootstrap cell at a copy of this checkout, and:

* pip's resolver, asked in a dry run, would install the helpers and nothing else;
* every chapter and the landing page run top to bottom with nbclient in that kernel, and
  their outputs are compared with the committed ones as nbval compares them (its own
  comparison, skipped keys and ``nbval-ignore-output`` tags): `make test` executes the
  notebooks once, here, so this is its nbval pass, under Colab's versions; `make nbval`
  (the workflow's notebooks job) runs nbval itself in the book's venv;
* pip replaced none of the preinstalled packages, and the bootstrap cell said in one line
  what it installed and how long it took.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
from clients.common import ROOT, checkout_copy, colab_venv_lock, require_colab_venv
from nbclient import NotebookClient
from nbval.plugin import IPyNbCell, coalesce_streams, find_comment_markers, find_metadata_tags

pytestmark = pytest.mark.slow

NOTEBOOKS = [ROOT / "book" / "intro.ipynb", *sorted((ROOT / "chapters").glob("*.ipynb"))]
OWN = "attention-book-helpers"
INSTALLED_LINE = re.compile(r"^Installed attention-book-helpers [\w.]+ in \d+ s\.$")


def _freeze(python: Path) -> dict[str, str]:
    out = subprocess.run(
        [python, "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True
    ).stdout
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(out)}


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """The Colab-like venv with the helpers removed, a kernelspec for it, and what it held."""
    python = require_colab_venv()
    with colab_venv_lock():
        subprocess.run(
            [python, "-m", "pip", "uninstall", "--quiet", "--yes", OWN],
            check=True,
            capture_output=True,
        )
        tmp = tmp_path_factory.mktemp("colab")
        spec = tmp / "jupyter" / "kernels" / "colab-like"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "Colab-like (ipywidgets 7.7.1)",
                    "language": "python",
                }
            )
        )
        state = {
            "python": python,
            "jupyter_path": str(tmp / "jupyter"),
            "source": checkout_copy(tmp / "checkout"),
            "before": _freeze(python),
            "bootstrap_lines": [],
        }
        yield state


def test_resolver_keeps_every_preinstalled_package(colab, tmp_path):
    """``pip install --dry-run --report`` of the helpers, with no constraints at all: the
    package's own requirements admit Colab's versions, so pip would add only the helpers."""
    report = tmp_path / "report.json"
    subprocess.run(
        [
            colab["python"],
            "-m",
            "pip",
            "install",
            "--quiet",
            "--dry-run",
            "--report",
            str(report),
            str(colab["source"]),
        ],
        check=True,
        capture_output=True,
    )
    installs = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert list(installs) == [OWN], f"pip would also install or replace: {installs}"


class _NbvalComparison:
    """nbval's comparison of one cell's outputs (``IPyNbCell.compare_outputs``), borrowed
    outside its collector: the keys it skips by default (the widget views' random model ids,
    images: it compares text), its stream coalescing and its failure report."""

    compare_outputs = IPyNbCell.compare_outputs
    format_output_compare = IPyNbCell.format_output_compare
    sanitize = IPyNbCell.sanitize
    SKIP = (
        "metadata",
        "traceback",
        "prompt_number",
        "output_type",
        "name",
        "execution_count",
        "application/vnd.jupyter.widget-view+json",
        "image/png",
        "image/jpeg",
    )

    def __init__(self, request):
        from nbval.plugin import nocolors

        self.config, self.ihook, self.colors = request.config, request.node.ihook, nocolors
        self.parent = type("File", (), {"skip_compare": self.SKIP, "sanitize_patterns": {}})

    def differences(self, executed, committed) -> list[str]:
        """One message per code cell whose outputs differ, as nbval reports it."""
        found = []
        code = [(a, b) for a, b in zip(executed.cells, committed.cells) if b.cell_type == "code"]
        for number, (ran, ref) in enumerate(code):
            options = {
                **dict(find_metadata_tags(ref.metadata)),
                **dict(find_comment_markers(ref.source)),
            }
            if options.get("check") is False or options.get("skip") or ref.execution_count is None:
                continue
            outputs = coalesce_streams([nbformat.from_dict(o) for o in ran.outputs])
            if number == 0:  # the bootstrap cell's one line when it installs (checked below)
                outputs = _without_installed_line(outputs)
            if not self.compare_outputs(outputs, coalesce_streams(ref.outputs)):
                found.append(
                    f"Cell {number}: outputs differ\n" + "\n".join(self.comparison_traceback)
                )
        return found


def _without_installed_line(outputs):
    kept = []
    for output in outputs:
        if output.output_type == "stream":
            text = "".join(
                line
                for line in output.text.splitlines(True)
                if not INSTALLED_LINE.match(line.rstrip("\n"))
            )
            if not text:
                continue
            output = nbformat.from_dict({**output, "text": text})
        kept.append(output)
    return kept


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_a_colab_like_kernel(colab, path, monkeypatch, request):
    monkeypatch.setenv("JUPYTER_PATH", colab["jupyter_path"])
    monkeypatch.setenv("HELPERS_SOURCE", str(colab["source"]))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel 6.17 on 3.11
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="colab-like",
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    differences = _NbvalComparison(request).differences(nb, nbformat.read(path, as_version=4))
    assert not differences, f"{path.relative_to(ROOT)}:\n" + "\n".join(differences)

    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.output_type == "stream")
    colab["bootstrap_lines"] += [line for line in printed.splitlines() if line]
    kinds = {
        m["model_name"]
        for m in nb.metadata.get("widgets", {})
        .get("application/vnd.jupyter.widget-state+json", {})
        .get("state", {})
        .values()
    }
    if kinds:  # live figures on ipywidgets 7: a slider and one Image, never a Stack
        assert "StackModel" not in kinds
        assert {"SelectionSliderModel", "ImageModel"} <= kinds, kinds


def test_bootstrap_replaced_nothing_and_said_what_it_did(colab):
    """Run after the notebooks (pytest keeps file order): pip only added packages."""
    if not colab["bootstrap_lines"]:
        pytest.skip("run with the notebook tests: the first one installs the helpers")
    after = _freeze(colab["python"])
    changed = {n: (v, after.get(n)) for n, v in colab["before"].items() if after.get(n) != v}
    assert changed == {}, f"pip replaced or removed preinstalled packages: {changed}"
    assert set(after) - set(colab["before"]) == {OWN}
    assert len(colab["bootstrap_lines"]) == 1, colab["bootstrap_lines"]
    assert INSTALLED_LINE.match(colab["bootstrap_lines"][0]), colab["bootstrap_lines"]
    print(colab["bootstrap_lines"][0])
