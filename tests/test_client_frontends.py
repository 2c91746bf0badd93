"""The chapters in real Jupyter front ends with a kernel, driven in Chromium.

* **ipywidgets 7 (Colab's widgets):** the classic Notebook 6.5 with widgetsnbextension 3.6
  in the Colab-like venv (``.venv-colab``), the closest installable relative of Colab's
  front end. The helpers are not preinstalled there: the chapter's bootstrap cell installs
  them, as on Colab.
* **ipywidgets 8:** JupyterLab 4 in the book's own venv.

In each: open a chapter, clear it, run all cells, then move the first slider by mouse and
by keyboard; the readout and the picture must change, no cell may raise and no widget may
show "Error displaying widget". A last test opens an executed chapter in JupyterLab
*without* running it, untrusted and then trusted, and records what a reader sees
(README, "Where it runs"). Screenshots go to ``_build/screenshots/clients/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clients.common import (
    SHOTS,
    checkout_copy,
    chromium,
    colab_venv_lock,
    free_port,
    jupyter_server,
    offline_page,
    require_colab_venv,
    unavailable,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
# A chapter with a live figure that runs in well under a minute.
CHAPTER = "02_attention_pooling.ipynb"
RUN_TIMEOUT_MS = 420_000


def _workdir(tmp: Path) -> Path:
    """A copy of the chapters, so a front end that autosaves never touches the checkout."""
    work = tmp / "chapters"
    shutil.copytree(ROOT / "chapters", work, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return work


def _env(tmp: Path, **extra: str) -> dict:
    """A private Jupyter home: no user config, settings or workspaces leak in or out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTHON"))}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_DATA_DIR=str(home / "data"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
        MPLBACKEND="Agg",
        **extra,
    )
    return env


# --- what is on the page: one vocabulary for both front ends --------------------------------


class Front:
    """Selectors and commands of one front end."""

    def __init__(
        self, name, *, handle, error_output, prompt_js, run_all_js, clear_js, kernel_idle_js
    ):
        self.name, self.handle, self.error_output = name, handle, error_output
        self.prompt_js, self.run_all_js, self.clear_js = prompt_js, run_all_js, clear_js
        self.kernel_idle_js = kernel_idle_js


CLASSIC = Front(
    "notebook6-ipywidgets7",
    handle=".widget-hslider .ui-slider-handle",
    error_output=".output_error",
    # Every code cell's prompt number, as Notebook 6 keeps them (null: never run, '*': running).
    prompt_js="() => Jupyter.notebook.get_cells().filter(c => c.cell_type === 'code')"
    ".map(c => c.input_prompt_number === undefined ? null : c.input_prompt_number)",
    run_all_js="() => Jupyter.notebook.execute_all_cells()",
    clear_js="() => Jupyter.notebook.clear_all_output()",
    kernel_idle_js="() => !!(Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected()"
    " && document.querySelector('#kernel_indicator_icon.kernel_idle_icon'))",
)

LAB = Front(
    "jupyterlab4-ipywidgets8",
    handle=".widget-hslider .noUi-handle",
    error_output='.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
    ' .jp-RenderedText:has-text("Traceback"), '
    '[data-mime-type="application/vnd.jupyter.error"]',
    prompt_js="() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')]"
    ".map(c => { const p = c.querySelector('.jp-InputPrompt').textContent.trim();"
    " const m = p.match(/\\[(.*)\\]/); return m && m[1].trim() ? m[1].trim() : null; })",
    run_all_js="() => window.jupyterapp.commands.execute('notebook:run-all-cells')",
    clear_js="() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')",
    kernel_idle_js="() => { const w = window.jupyterapp.shell.currentWidget;"
    " const s = w && w.sessionContext && w.sessionContext.session;"
    " return !!(s && s.kernel && s.kernel.status === 'idle'); }",
)


def _run_all(page, front: Front) -> None:
    """Clear every output, run all cells, wait until each code cell has a prompt number."""
    page.wait_for_function(front.kernel_idle_js, timeout=120_000)
    page.evaluate(front.clear_js)
    page.wait_for_function(f"() => ({front.prompt_js})().every(p => p === null)", timeout=30_000)
    page.evaluate(front.run_all_js)
    page.wait_for_function(
        f"() => {{ const p = ({front.prompt_js})();"
        " return p.length > 0 && p.every(x => x !== null && x !== '*'); }",
        timeout=RUN_TIMEOUT_MS,
        polling=1000,
    )
    page.wait_for_function(front.kernel_idle_js, timeout=60_000)
    page.wait_for_timeout(1000)  # the last widget views render


def _figure_parts(page, front: Front, index: int = 0):
    handle = page.locator(front.handle).nth(index)
    slider = handle.locator("xpath=ancestor::div[contains(@class,'widget-slider')][1]")
    readout = slider.locator(".widget-readout")
    figure = handle.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    image = figure.locator("img.widget-image:visible, img.live-frame:visible").first
    return handle, readout, figure, image


def _picture(image) -> bytes:
    return image.screenshot(animations="disabled")


def _assert_mouse_and_keyboard_move_the_figure(
    page, front: Front, shots: Path, tag: str
) -> list[str]:
    """Drag the first slider's handle, then press keys on it; both change the readout and the
    picture. Returns the readouts seen, for the report."""
    handle, readout, figure, image = _figure_parts(page, front)
    figure.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    seen = [readout.inner_text().strip()]
    before = _picture(image)
    figure.screenshot(path=str(shots / f"{tag}-before.png"))

    box = handle.bounding_box()
    track = handle.locator("xpath=..").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    # Drag to the far side of the track from where the handle is.
    target = track["x"] + (
        track["width"] * 0.9 if box["x"] < track["x"] + track["width"] / 2 else track["width"] * 0.1
    )
    page.mouse.move(target, box["y"] + box["height"] / 2, steps=12)
    page.mouse.up()
    page.wait_for_function(
        "([el, old]) => el.textContent.trim() !== old",
        arg=[readout.element_handle(), seen[0]],
        timeout=10_000,
    )
    page.wait_for_timeout(800)  # ipywidgets 7: the kernel sends the new frame
    seen.append(readout.inner_text().strip())
    by_mouse = _picture(image)
    figure.screenshot(path=str(shots / f"{tag}-mouse.png"))
    assert by_mouse != before, f"{front.name}: dragging the slider did not change the picture"

    handle.focus()
    key = "ArrowLeft" if target > track["x"] + track["width"] / 2 else "ArrowRight"
    page.keyboard.press(key)
    page.wait_for_function(
        "([el, old]) => el.textContent.trim() !== old",
        arg=[readout.element_handle(), seen[-1]],
        timeout=10_000,
    )
    page.wait_for_timeout(800)
    seen.append(readout.inner_text().strip())
    by_key = _picture(image)
    figure.screenshot(path=str(shots / f"{tag}-keyboard.png"))
    assert by_key != by_mouse, f"{front.name}: a key press did not change the picture"
    return seen


# Opening an executed chapter, Notebook 6 tries to restore the widget state saved with it,
# written by ipywidgets 8 (@jupyter-widgets/controls@2.0.0) for the book, and logs, at some
# point while the page loads, that it has no StackModel. Those views are replaced when the
# cells run; the kernel's own ipywidgets 7 models are controls@1.5.0, so every error about
# them still counts.
SAVED_STATE = "@jupyter-widgets/controls@2.0.0"


def _assert_no_errors(page, front: Front, console) -> None:
    body = page.locator("body").inner_text()
    assert "Error displaying widget" not in body
    errors = page.locator(front.error_output)
    assert errors.count() == 0, f"a cell raised:\n{errors.first.inner_text()[:2000]}"
    widget_errors = [
        text
        for kind, text in console
        if kind == "error"
        and ("widget" in text.lower() or "model" in text.lower())
        and not (front is CLASSIC and SAVED_STATE in text)
    ]
    assert widget_errors == [], widget_errors


# --- Notebook 6.5 + ipywidgets 7 -------------------------------------------------------------


@pytest.fixture
def colab_alone():
    """The Colab-like venv, held alone (tests/test_clients.py uses it in another worker)."""
    python = require_colab_venv()
    with colab_venv_lock():
        yield python


def test_notebook6_with_ipywidgets7_runs_a_chapter_and_its_slider_moves(tmp_path, colab_alone):
    python = colab_alone
    subprocess.run(
        [python, "-m", "pip", "uninstall", "--quiet", "--yes", "attention-book-helpers"],
        check=True,
        capture_output=True,
    )
    work = _workdir(tmp_path)
    env = _env(tmp_path, HELPERS_SOURCE=str(checkout_copy(tmp_path / "checkout")))
    port = free_port()
    argv = [
        str(python),
        "-m",
        "notebook",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--NotebookApp.token=",
        "--NotebookApp.password=",
        f"--notebook-dir={work}",
        "--NotebookApp.open_browser=False",
        "--allow-root",
    ]
    shots = SHOTS
    shots.mkdir(parents=True, exist_ok=True)
    with (
        jupyter_server(argv, cwd=work, env=env, port=port, log=tmp_path / "server.log") as url,
        chromium() as browser,
    ):
        page, external, console = offline_page(browser)
        page.goto(f"{url}/notebooks/{CHAPTER}", wait_until="load")
        page.wait_for_function(
            "() => window.Jupyter && Jupyter.notebook && Jupyter.notebook._fully_loaded",
            timeout=60_000,
        )
        _run_all(page, CLASSIC)
        page.screenshot(path=str(shots / f"{CLASSIC.name}-page.png"))
        _assert_no_errors(page, CLASSIC, console)
        assert page.locator(CLASSIC.handle).count() >= 1, "no slider rendered"
        # ipywidgets 7 in the kernel: one Image, no Stack (which 7 does not have).
        assert page.locator(".widget-stack, .jupyter-widget-Stack").count() == 0
        seen = _assert_mouse_and_keyboard_move_the_figure(page, CLASSIC, shots, CLASSIC.name)
        _assert_no_errors(page, CLASSIC, console)
        assert external == [], f"requests left 127.0.0.1: {external}"
        print(f"Notebook 6.5 / ipywidgets 7: {CHAPTER} slider readouts {seen}")


# --- JupyterLab 4 + ipywidgets 8 -------------------------------------------------------------


def _lab_python() -> Path:
    python = ROOT / ".venv" / "bin" / "python"
    if not (ROOT / ".venv" / ".installed").is_file():
        unavailable("no book venv at .venv: run `make book`")
    return python


@contextlib.contextmanager
def _lab(tmp: Path):
    """JupyterLab 4 from the book's venv on a copy of the chapters, and Chromium.
    Yields (python, env, work folder, server URL, browser)."""
    python, work = _lab_python(), _workdir(tmp)
    settings = tmp / "lab-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # Render every cell (Lab 4 otherwise renders only the cells in view).
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    env = _env(
        tmp,
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"),
    )
    port = free_port()
    argv = [
        str(python),
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={work}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--allow-root",
    ]
    SHOTS.mkdir(parents=True, exist_ok=True)
    with (
        jupyter_server(argv, cwd=work, env=env, port=port, log=tmp / "server.log") as url,
        chromium() as browser,
    ):
        yield python, env, work, url, browser


def _open_in_lab(page, url: str) -> None:
    page.goto(f"{url}/lab/tree/{CHAPTER}", wait_until="load")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.content"
        " && window.jupyterapp.shell.currentWidget.context.isReady",
        timeout=90_000,
    )
    page.wait_for_timeout(1500)


def test_jupyterlab4_with_ipywidgets8_runs_a_chapter_and_its_slider_moves(tmp_path):
    with _lab(tmp_path) as (_, _, _, url, browser):
        page, external, console = offline_page(browser)
        _open_in_lab(page, url)
        _run_all(page, LAB)
        page.screenshot(path=str(SHOTS / f"{LAB.name}-page.png"))
        _assert_no_errors(page, LAB, console)
        assert page.locator(LAB.handle).count() >= 1, "no slider rendered"
        seen = _assert_mouse_and_keyboard_move_the_figure(page, LAB, SHOTS, LAB.name)
        _assert_no_errors(page, LAB, console)
        assert external == [], f"requests left 127.0.0.1: {external}"
        print(f"JupyterLab 4 / ipywidgets 8: {CHAPTER} slider readouts {seen}")


def _png_outputs(path: Path) -> int:
    """How many outputs of the notebook at ``path`` carry an ``image/png``."""
    nb = json.loads(path.read_text())
    return sum(
        "image/png" in output.get("data", {})
        for cell in nb["cells"]
        for output in cell.get("outputs", [])
    )


def test_jupyterlab4_shows_an_executed_chapter_without_running_it(tmp_path):
    """Opened from disk, a notebook is untrusted: JupyterLab shows each live figure's first
    frame, the ``image/png`` its output carries beside the widget view, as a picture (not
    the text form ``LiveFigure(...)``), with no slider. Once trusted (``jupyter trust``), the
    saved widget state renders and the sliders move with no code run: the links are in
    JavaScript (jslink), as in the static book."""
    with _lab(tmp_path) as (python, env, work, url, browser):
        page, external, console = offline_page(browser)
        _open_in_lab(page, url)
        page.wait_for_timeout(2000)
        page.screenshot(path=str(SHOTS / "jupyterlab4-untrusted.png"))
        text = page.locator(".jp-Notebook").inner_text()
        assert "LiveFigure(" not in text, "untrusted: a live figure shows as text, not a picture"
        assert page.locator(LAB.handle).count() == 0
        pictures = page.locator(".jp-OutputArea-output img").count()
        assert pictures == _png_outputs(work / CHAPTER), (
            f"untrusted: {pictures} pictures shown, expected one per image/png output "
            f"(static figures and live figures' first frames)"
        )
        page.close()

        subprocess.run(
            [python, "-m", "jupyter", "trust", str(work / CHAPTER)],
            env=env,
            check=True,
            capture_output=True,
        )
        page, external, console = offline_page(browser)
        _open_in_lab(page, url)
        page.wait_for_selector(LAB.handle, timeout=60_000)
        page.screenshot(path=str(SHOTS / "jupyterlab4-trusted-not-run-page.png"))
        prompts = page.evaluate(LAB.prompt_js)
        seen = _assert_mouse_and_keyboard_move_the_figure(
            page, LAB, SHOTS, "jupyterlab4-trusted-not-run"
        )
        _assert_no_errors(page, LAB, console)
        # Nothing was run in this session: the prompts are the saved ones.
        assert page.evaluate(LAB.prompt_js) == prompts
        assert external == [], f"requests left 127.0.0.1: {external}"
        print(f"JupyterLab 4, trusted, not run: {CHAPTER} slider readouts {seen}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-s"]))
