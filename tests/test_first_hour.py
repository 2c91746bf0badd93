"""A newcomer's first hour (issue 19): the traps met from a fresh clone, each shut by a test.

- ``make execute`` rewrites nothing that did not change (widget ids, stream chunks, PNG bytes);
- the bootstrap cell says in one message why it could not install, and installs a clone's own
  helpers inside a clone; ``make set-repo`` writes cells as nbformat's list of lines;
- the book build names a notebook whose JSON is invalid or whose live figure lost its state;
- ``make lab`` works on a scratch copy, ``make serve`` names a busy port, ``make help`` lists
  every target, ``make check-chapter`` refuses a vague NB, torch comes from the CPU index;
- the README's first screen has the site, the Colab badge, the two commands and a way in.

Nothing here reaches the network: pip is a stand-in, and notebooks run from a temp folder.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "tools"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import bootstrap  # noqa: E402
import execute  # noqa: E402
import notebook_checks  # noqa: E402

pytestmark = pytest.mark.book  # the book's tools, Makefile and README, not the helpers

# ---------------------------------------------------------------------------------------
# make execute: a second run of an unchanged notebook rewrites nothing


def _fixture_notebook(path: Path) -> None:
    """A tiny notebook with what churned before: widgets, a jslink, split stdout, a PNG."""
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [
        """\
        import ipywidgets as widgets
        slider = widgets.IntSlider(value=3, min=0, max=9, description="n")
        text = widgets.Text("x")
        widgets.jslink((slider, "value"), (text, "value"))
        widgets.VBox([slider, text])""",
        """\
        import sys
        for i in range(40):
            print(i)
            sys.stdout.flush()
        print("done", file=sys.stderr)""",
        """\
        %matplotlib inline
        import matplotlib.pyplot as plt
        from IPython.display import display
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [1, 0])
        display(fig)
        plt.close(fig)""",
        "widgets.IntSlider(value=5, description='second')",
    ]
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c)) for c in cells]
    nbformat.write(nb, path)


def _execute(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "book" / "tools" / "execute.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_execute_twice_changes_nothing_and_keeps_equal_pictures(tmp_path):
    path = tmp_path / "fixture.ipynb"
    _fixture_notebook(path)
    first = _execute(path)
    assert first.returncode == 0, first.stderr
    assert "TCP" not in first.stderr, f"the kernel warned about TCP: {first.stderr}"
    once = path.read_bytes()
    nb = json.loads(once)
    state = nb["metadata"]["widgets"][execute.WIDGET_STATE]["state"]
    assert len(state) >= 8, "the fixture's widgets must be saved"
    streams = [o for o in nb["cells"][1]["outputs"] if o["output_type"] == "stream"]
    assert [o["name"] for o in streams] == ["stdout", "stderr"], "one output per stream"
    # The static figure's smallest text (10-point ticks at 100 dpi), for tests/test_browser.py.
    figure = nb["cells"][2]["outputs"][0]
    assert figure["metadata"]["book"] == {"smallest_text_px": 13.89}, figure["metadata"]

    # The same picture encoded differently (as matplotlib may): the old bytes must stay.
    png = nb["cells"][2]["outputs"][0]["data"]["image/png"]
    from PIL import Image

    buffer = io.BytesIO()
    Image.open(io.BytesIO(base64.b64decode(png))).save(buffer, "PNG", compress_level=1)
    other = base64.b64encode(buffer.getvalue()).decode()
    assert other != png
    path.write_text(once.decode().replace(png, other), encoding="utf-8")
    kept = path.read_bytes()

    second = _execute(path)
    assert second.returncode == 0, second.stderr
    assert path.read_bytes() == kept, "a re-execution with nothing changed rewrote the notebook"


def test_stable_ids_do_not_depend_on_the_order_messages_came_in():
    a, b, c, link = "a" * 32, "b" * 32, "c" * 32, "d" * 32
    state = {
        a: {"model_name": "VBoxModel", "state": {"children": [f"IPY_MODEL_{b}", f"IPY_MODEL_{c}"]}},
        b: {"model_name": "LayoutModel", "state": {}},
        c: {"model_name": "LayoutModel", "state": {"width": "1px"}},
        link: {"model_name": "LinkModel", "state": {"source": [f"IPY_MODEL_{b}", "value"]}},
    }
    cell = {"outputs": [{"data": {execute.WIDGET_VIEW: {"model_id": a}}}]}
    one = execute.stable_ids(state, [("cell-1", cell, [a, b, c, link])])
    two = execute.stable_ids(state, [("cell-1", cell, [link, c, b, a])])
    assert one == two
    assert one[a] == execute.widget_id("cell-1", 0)
    assert len(set(one.values())) == 4


def test_join_streams_joins_only_neighbours_of_one_stream():
    out = [
        {"output_type": "stream", "name": "stdout", "text": "1\n"},
        {"output_type": "stream", "name": "stdout", "text": ["2\n", "3\n"]},
        {"output_type": "display_data", "data": {}},
        {"output_type": "stream", "name": "stdout", "text": "4\n"},
        {"output_type": "stream", "name": "stderr", "text": "e\n"},
    ]
    joined = execute.join_streams(out)
    assert [o.get("text") for o in joined] == ["1\n2\n3\n", None, "4\n", "e\n"]


def test_execute_names_a_missing_notebook(tmp_path):
    run = _execute(tmp_path / "nope.ipynb")
    assert run.returncode == 2 and "no such notebook" in run.stdout and "nope.ipynb" in run.stdout


# ---------------------------------------------------------------------------------------
# The bootstrap cell with a stand-in pip: its messages, and where it installs from

FAKE_PIP = """\
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_PIP_LOG"], "w") as f:
    json.dump(args, f)
sys.stderr.write(os.environ.get("FAKE_PIP_STDERR", ""))
code = int(os.environ.get("FAKE_PIP_RC", "0"))
if code == 0:
    with open(args[args.index("--report") + 1], "w") as f:
        json.dump({"install": [{"metadata": {"name": "attention-book-helpers",
                                             "version": "0.1.0"}}]}, f)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(os.path.join(here, "helpers"), exist_ok=True)
    open(os.path.join(here, "helpers", "__init__.py"), "w").close()
sys.exit(code)
"""

GIT_OFFLINE = (
    "  Running command git clone --filter=blob:none --quiet https://github.com/o/r /tmp/pip-x\n"
    "  fatal: unable to access 'https://github.com/o/r/': Could not resolve host: github.com\n"
    "  error: subprocess-exited-with-error\n"
)
GIT_NO_REPOSITORY = (
    "  fatal: could not read Username for 'https://github.com': No such device or address\n"
    "  error: subprocess-exited-with-error\n"
)
CONFLICT = (
    "ERROR: Cannot install attention-book-helpers==0.1.0 because these package versions have "
    "conflicting dependencies.\n\nThe conflict is caused by:\n    The user requested "
    "(constraint) tqdm==1.0\nERROR: ResolutionImpossible: for help visit https://pip.pypa.io\n"
)


@pytest.fixture
def cell_runner(tmp_path):
    """Run the bootstrap cell in a Python that has no helpers and a stand-in pip."""
    fake = tmp_path / "fake"
    (fake / "pip").mkdir(parents=True)
    (fake / "pip" / "__init__.py").write_text("")
    (fake / "pip" / "__main__.py").write_text(FAKE_PIP)
    log = tmp_path / "pip-args.json"

    def run(cwd: Path, rc: int = 0, stderr: str = "", source: str | None = None):
        log.unlink(missing_ok=True)
        shutil.rmtree(fake / "helpers", ignore_errors=True)  # what a previous run installed
        env = {k: v for k, v in os.environ.items() if k not in ("HELPERS_SOURCE", "PYTHONPATH")}
        env.update(
            PYTHONPATH=str(fake),
            FAKE_PIP_LOG=str(log),
            FAKE_PIP_RC=str(rc),
            FAKE_PIP_STDERR=stderr,
        )
        if source:
            env["HELPERS_SOURCE"] = source
        cell = bootstrap.cell_source("https://github.com/o/r")
        # -S: without site-packages, so the book's own helpers are not importable
        done = subprocess.run(
            [sys.executable, "-S", "-c", cell],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=120,
        )
        args = json.loads(log.read_text()) if log.exists() else None
        return done, args

    return run


@pytest.mark.parametrize(
    ("stderr", "cause", "todo"),
    [
        (GIT_OFFLINE, "no network: pip could not reach https://github.com/o/r", "connect to"),
        (GIT_NO_REPOSITORY, "no public repository at https://github.com/o/r", "check the book"),
        (
            CONFLICT,
            "a version conflict with what is preinstalled here (",
            "run the book in a fresh",
        ),
        ("ERROR: something else\n", "pip failed", "read pip's message"),
    ],
    ids=["offline", "no-repository", "conflict", "other"],
)
def test_bootstrap_cell_says_why_it_could_not_install(cell_runner, tmp_path, stderr, cause, todo):
    run, _ = cell_runner(tmp_path, rc=1, stderr=stderr)
    assert run.returncode == 1 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert "Traceback" not in run.stderr and len(lines) == 3, run.stderr
    assert lines[0].startswith(f"Could not install the book's helpers: {cause}"), lines[0]
    assert lines[1].startswith(f"To do: {todo}") and "HELPERS_SOURCE" in lines[1], lines[1]
    assert lines[2].startswith("pip said: ") and ("ERROR" in lines[2] or "fatal" in lines[2])
    if stderr is GIT_OFFLINE:
        assert "version conflict" not in run.stderr


FAKE_GIT = """#!/bin/sh
case "$1" in version|--version) echo "git version 2.39.5"; exit 0;; esac
printf '%s\\n' "$FAKE_GIT_SAYS" >&2
exit 128
"""


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    """A fresh venv with its own pip and no helpers, whose pip reaches no index."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv / "bin" / "python"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("git_says", "cause"),
    [
        (
            "fatal: unable to access 'https://github.com/o/r/': Could not resolve host: github.com",
            "no network: pip could not reach https://github.com/o/r",
        ),
        (
            "remote: Repository not found.\nfatal: repository 'https://github.com/o/r/' not found",
            "no public repository at https://github.com/o/r",
        ),
    ],
    ids=["offline", "no-repository"],
)
def test_bootstrap_cell_reads_real_pip_failures(bare_venv, tmp_path, git_says, cause):
    """The real pip, cloning with a stand-in git that fails as git does offline or on a typo."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(FAKE_GIT)
    (bin_dir / "git").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("HELPERS_SOURCE", "PYTHONPATH")}
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        FAKE_GIT_SAYS=git_says,
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    cell = bootstrap.cell_source("https://github.com/o/r")
    run = subprocess.run(
        [bare_venv, "-c", cell], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith(f"Could not install the book's helpers: {cause}."), run.stderr
    assert "version conflict" not in run.stderr


def test_bootstrap_cell_installs_the_clone_it_is_in(cell_runner, tmp_path):
    clone = tmp_path / "clone"
    (clone / "src" / "helpers").mkdir(parents=True)
    (clone / "src" / "helpers" / "__init__.py").write_text("")
    (clone / "chapters").mkdir()
    run, args = cell_runner(clone / "chapters")
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"Installed attention-book-helpers 0\.1\.0 in \d+ s\.\n", run.stdout)
    assert args[-2:] == ["-e", str(clone.resolve())], args


def test_bootstrap_cell_prefers_helpers_source_then_the_repository(cell_runner, tmp_path):
    _, args = cell_runner(tmp_path, source="/some/wheel.whl")
    assert args[-1] == "/some/wheel.whl" and "-e" not in args
    _, args = cell_runner(tmp_path)  # outside any clone
    assert args[-1] == "git+https://github.com/o/r" and "-e" not in args


def test_set_repo_writes_the_cell_as_a_list_of_lines(tmp_path):
    for name in ("_config.yml", "CITATION.cff", "README.md"):
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "chapters").mkdir()
    (tmp_path / "book").mkdir()
    chapter = tmp_path / "chapters" / "02_attention_pooling.ipynb"
    shutil.copy2(ROOT / "chapters" / chapter.name, chapter)
    shutil.copy2(ROOT / "book" / "intro.ipynb", tmp_path / "book" / "intro.ipynb")
    before = json.loads(chapter.read_text())
    changed = bootstrap.set_repository("https://github.com/someone/fork", root=tmp_path)
    assert "README.md" in changed
    readme = (tmp_path / "README.md").read_text()
    assert "https://someone.github.io/fork/" in readme
    assert "colab.research.google.com/github/someone/fork/blob/main/" in readme
    assert bootstrap.repository_url() not in readme
    after = json.loads(chapter.read_text())
    source = after["cells"][0]["source"]
    assert isinstance(source, list) and len(source) > 10, "nbformat's list of lines"
    assert "".join(source) == bootstrap.cell_source("https://github.com/someone/fork")
    assert after["cells"][1:] == before["cells"][1:] and after["metadata"] == before["metadata"]


@pytest.mark.parametrize("bad", ["https://github.com/me/..", "https://github.com/me/."])
def test_set_repo_refuses_a_dot_repository(tmp_path, bad):
    shutil.copy2(ROOT / "_config.yml", tmp_path / "_config.yml")
    with pytest.raises(ValueError, match="OWNER/REPO"):
        bootstrap.set_repository(bad, root=tmp_path)


# ---------------------------------------------------------------------------------------
# The book build names the notebook: invalid JSON, a live figure without saved state

CONF = f"""\
import sys
sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
extensions = ["myst_nb", "plain_links"]
nb_execution_mode = "off"
exclude_patterns = ["_build", "book"]
"""


def _widget_notebook(saved: bool) -> dict:
    model = "f" * 32
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Fixture"),
        nbformat.v4.new_code_cell(
            "slider",
            execution_count=1,
            outputs=[
                nbformat.v4.new_output(
                    "execute_result",
                    data={
                        "text/plain": "IntSlider(value=1)",
                        notebook_checks.WIDGET_VIEW: {
                            "model_id": model,
                            "version_major": 2,
                            "version_minor": 0,
                        },
                    },
                    execution_count=1,
                )
            ],
        ),
    ]
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    state = {
        model: {
            "model_module": "@jupyter-widgets/controls",
            "model_module_version": "2.0.0",
            "model_name": "IntSliderModel",
            "state": {"value": 1},
        }
    }
    if saved:
        nb.metadata.widgets = {
            notebook_checks.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}
        }
    return nb


def _sphinx(tmp_path: Path, notebook_text: str) -> subprocess.CompletedProcess:
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    (src / "book" / "glossary.md").write_text("# Glossary\n")  # what plain_links reads
    (src / "book" / "references.bib").write_text("")
    (src / "conf.py").write_text(CONF)
    (src / "index.md").write_text("# Index\n\n```{toctree}\nfigure\n```\n")
    (src / "figure.ipynb").write_text(notebook_text)
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "."]
        + [str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=src,
        timeout=300,
    )


@pytest.mark.slow
def test_build_passes_a_live_figure_with_saved_state(tmp_path):
    run = _sphinx(tmp_path, nbformat.writes(_widget_notebook(saved=True)))
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.slow
def test_build_fails_naming_a_live_figure_without_saved_state(tmp_path):
    run = _sphinx(tmp_path, nbformat.writes(_widget_notebook(saved=False)))
    assert run.returncode != 0
    assert re.search(
        r"figure\.ipynb: WARNING: live figure in cell 2 \(In \[1\]\) has no saved widget state",
        run.stderr,
    ), run.stderr


@pytest.mark.slow
def test_build_names_a_notebook_whose_json_is_invalid(tmp_path):
    text = nbformat.writes(_widget_notebook(saved=True))
    broken = text.replace('"cell_type": "code",', '"cell_type": "code"', 1)
    assert broken != text
    run = _sphinx(tmp_path, broken)
    assert run.returncode != 0
    assert "figure.ipynb is not valid notebook JSON: Expecting ',' delimiter at line" in (
        run.stderr
    ), run.stderr
    assert "Traceback" not in run.stdout + run.stderr


@pytest.mark.slow
def test_build_fails_naming_broken_latex(tmp_path):
    nb = _widget_notebook(saved=True)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("A ratio $\\frac{1}{$ and more."))
    run = _sphinx(tmp_path, nbformat.writes(nb))
    assert run.returncode != 0
    assert re.search(
        r"figure\.ipynb: WARNING: broken LaTeX in cell 2: unbalanced braces in \$\\frac\{1\}\{\$",
        run.stderr,
    ), run.stderr


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("$\\frac{1}{$", "unbalanced braces"),
        ("a $x + y and no end", "a $ opens maths that never closes"),
        ("$$\n\\left( x\n$$", "\\left without \\right"),
        ("$\\begin{aligned} x$", "\\begin without its \\end"),
    ],
)
def test_math_problems_finds_what_mathjax_fails_on(markdown, problem):
    assert [p for p in notebook_checks.math_problems(markdown) if p.startswith(problem)]


def test_math_problems_passes_good_maths_code_and_escaped_dollars():
    good = "$\\left\\{ x \\right\\}$, $$\\begin{aligned} a \\end{aligned}$$, `$x`, costs \\$5"
    assert notebook_checks.math_problems(good) == []
    for path in [*sorted((ROOT / "chapters").glob("*.ipynb")), ROOT / "book" / "intro.ipynb"]:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                problems = notebook_checks.math_problems("".join(cell["source"]))
                assert problems == [], f"{path.name}: {problems}"


def test_tools_name_a_notebook_whose_json_is_invalid(tmp_path):
    bad = tmp_path / "broken.ipynb"
    bad.write_text('{"cells": [')
    run = _execute(bad)
    assert run.returncode == 1 and f"error: {bad} is not valid notebook JSON" in run.stderr
    assert "Traceback" not in run.stderr
    for name in ("_config.yml",):
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "chapters").mkdir()
    (tmp_path / "book").mkdir()
    shutil.copy2(bad, tmp_path / "chapters" / "01_x.ipynb")
    with pytest.raises(ValueError, match=r"01_x\.ipynb: not valid notebook JSON"):
        bootstrap.check_cells(tmp_path)


def test_views_without_state_names_each_figure():
    nb = _widget_notebook(saved=False)
    assert len(notebook_checks.views_without_state(nb)) == 1
    assert notebook_checks.views_without_state(_widget_notebook(saved=True)) == []
    assert notebook_checks.invalid_json("[]") == "not a notebook (no list of cells)"


# ---------------------------------------------------------------------------------------
# The Makefile: help, serve on a busy port, lab on a copy, check-chapter, torch's index


def _make(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
        timeout=120,
    )


def test_make_help_lists_every_target():
    run = _make("help")
    assert run.returncode == 0, run.stderr
    listed = set(re.findall(r"^make ([a-z-]+)", run.stdout, flags=re.M))
    makefile = (ROOT / "Makefile").read_text()
    phony = set(" ".join(re.findall(r"^\.PHONY:((?:.*\\\n)*.*)", makefile, re.M)).split())
    phony -= {"\\", "check-python", "check-tools"}
    assert phony <= listed, f"targets missing from `make help`: {sorted(phony - listed)}"


def test_make_serve_names_a_busy_port(tmp_path):
    if not (ROOT / "_build" / "html" / "index.html").is_file():
        pytest.skip("no built site: make book first")
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        run = _make("serve", f"PORT={port}")
    assert run.returncode != 0
    assert f"error: port {port} is busy: make serve PORT=" in run.stdout, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr


def test_make_lab_runs_on_a_scratch_copy_and_takes_lab_args():
    run = _make("-n", "lab", "LAB_ARGS=--port=8890 --no-browser")
    assert run.returncode == 0, run.stderr
    command = run.stdout.replace("\\\n", " ")
    lab = next(line for line in command.splitlines() if "jupyter lab" in line)
    assert "--ServerApp.root_dir=_build/lab" in lab and "chapters" not in lab.split("lab", 1)[1]
    assert "--port=8890 --no-browser" in lab
    assert "cp -a -u chapters/*.ipynb _build/lab/chapters/" in command
    if os.geteuid() == 0:
        assert "--allow-root" in lab


def test_make_trust_is_the_readmes_trust_step():
    assert "make trust" in (ROOT / "README.md").read_text()
    run = _make("-n", "trust")
    assert run.returncode == 0 and ".venv/bin/jupyter trust chapters/*.ipynb" in run.stdout


@pytest.mark.parametrize(
    ("nb", "message"),
    [
        ("", "usage: make check-chapter NB=02"),
        ("0", "notebooks, not one"),
        ("99", "names 0 notebooks, not one"),
    ],
)
def test_make_check_chapter_refuses_a_vague_chapter(nb, message):
    run = _make("check-chapter", f"NB={nb}")
    assert run.returncode != 0 and message in run.stdout, run.stdout + run.stderr


def test_make_check_chapter_checks_that_one_chapter():
    run = _make("-n", "check-chapter", "NB=02")
    assert run.returncode == 0, run.stderr
    assert '-k "02_attention_pooling"' in run.stdout
    assert "--nbval chapters/02_attention_pooling.ipynb" in run.stdout


def test_torch_comes_from_the_cpu_index_on_linux():
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "install --quiet torch==" in line]
    assert len(installs) == 2 and all(line.endswith("$(TORCH_FROM)") for line in installs)
    assert "TORCH_INDEX ?= https://download.pytorch.org/whl/cpu" in makefile
    # An unreachable index is left out with a note, so an offline install still works.
    run = _make("-n", "-W", "requirements.txt", ".venv/.installed", "TORCH_INDEX=")
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stdout.splitlines() if "install --quiet torch==" in x)
    assert line.split("torch==2.13.0", 1)[1].strip() == ""


# ---------------------------------------------------------------------------------------
# The README's first screen serves three readers


def test_readme_first_screen_reads_runs_and_contributes():
    text = (ROOT / "README.md").read_text()
    first = "\n".join(text.splitlines()[:40])
    url = bootstrap.repository_url()
    assert bootstrap.site_url(url) in first, "a link to the published site"
    assert f"colab.research.google.com/github/{url.removeprefix('https://github.com/')}/" in first
    assert "colab.research.google.com/assets/colab-badge.svg" in first, "an Open in Colab badge"
    assert "make book" in first and "make test" in first and "CONTRIBUTING.md" in first
    assert "d2l" in first.lower() and "Annotated Transformer" in first
    assert first.index("make book") < text.index("| where |"), "the long tables come later"


def test_build_refuses_a_widget_bundle_older_than_its_sources(tmp_path):
    """book/_ext/theme_fixes.py compares the bundle with book/tools/widgets (it once looked in
    a folder that does not exist, so a stale bundle went unnoticed)."""
    import types

    import theme_fixes
    from sphinx.errors import ExtensionError

    bundle = tmp_path / "book" / "vendor" / "widgets" / "embed.js"
    source = tmp_path / "book" / "tools" / "widgets" / "embed.js"
    for f in (bundle, source):
        f.parent.mkdir(parents=True)
        f.write_text("//")
    app = types.SimpleNamespace(confdir=str(tmp_path))
    os.utime(source, (1_000_000, 1_000_000))
    os.utime(bundle, (2_000_000, 2_000_000))
    theme_fixes._check_widget_bundle(app)  # newer bundle: fine
    os.utime(source, (3_000_000, 3_000_000))
    with pytest.raises(ExtensionError, match="older than book/tools/widgets"):
        theme_fixes._check_widget_bundle(app)
