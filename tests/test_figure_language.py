"""The figures' language (helpers.figures.language): English, or Chinese in the 中文版.

* The catalog (src/helpers/figures/zh_CN.po) reads as babel, gettext's Python reference,
  reads it; every entry is translated, none fuzzy, each keeps its ``{}``.
* ``translate``: exact entries, patterns with ``{}`` (the most specific first, a part that is
  itself an entry translated too), maths and numbers left alone, a missing text noted (and
  logged for book/tools/execute.py); English unchanged.
* In a fresh interpreter with ``BOOK_LANG=zh_CN``: matplotlib's text, the slider labels and
  the frames' alt text come out in Chinese, in a CJK font, with nothing left untranslated;
  without a CJK font the figures stay English and a warning says why.
* The helpers' wheel (what Colab installs from git) carries the catalog.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from helpers.figures import language

CATALOG = Path(language.__file__).with_name("zh_CN.po")


@pytest.fixture
def chinese(monkeypatch):
    monkeypatch.setenv(language.VARIABLE, "zh_CN")
    monkeypatch.setattr(language, "untranslated", set())
    monkeypatch.setattr(language, "_drawable", lambda _: True)  # as with a CJK font
    monkeypatch.delenv(language.LOG_VARIABLE, raising=False)


def test_the_catalog_reads_as_babel_reads_it():
    with CATALOG.open("rb") as f:
        reference = read_po(f, locale="zh_CN")
    expected = {
        (f"{m.context}\x04{m.id}" if m.context else m.id): m.string
        for m in reference
        if m.id and m.string and not m.fuzzy
    }
    assert language.parse_po(CATALOG.read_text(encoding="utf-8")) == expected


def test_every_figure_text_is_translated_and_keeps_its_parts():
    with CATALOG.open("rb") as f:
        catalog = read_po(f, locale="zh_CN")
    missing = [m.id for m in catalog if m.id and (not m.string or m.fuzzy)]
    assert not missing, f"untranslated or fuzzy in {CATALOG.name}: {missing}"
    parts = [m.id for m in catalog if m.id and m.id.count("{}") != m.string.count("{}")]
    assert not parts, f"a translation with another number of {{}} than its English: {parts}"


def test_parse_po_skips_fuzzy_untranslated_and_the_header():
    po = textwrap.dedent(
        r"""
        msgid ""
        msgstr "Content-Type: text/plain; charset=UTF-8\n"

        #, fuzzy
        msgid "old"
        msgstr "旧"

        msgid "empty"
        msgstr ""

        #. a comment
        msgid ""
        "two\n"
        "lines"
        msgstr "两\n行 \"引\""

        msgctxt "helpers"
        msgid "a plot"
        msgstr "一幅图"
        """
    )
    assert language.parse_po(po) == {"two\nlines": '两\n行 "引"', "helpers\x04a plot": "一幅图"}


def test_english_is_left_as_written(monkeypatch):
    monkeypatch.delenv(language.VARIABLE, raising=False)
    assert language.current() == "en"
    assert language.translate("attention weights") == "attention weights"
    assert language.phrase("{} against {}", "weight", "key") == "weight against key"


def test_translate_exact_patterns_and_parts(chinese, monkeypatch):
    entries = {
        "keys": "键",
        "head {}": "头 {}",
        "head {}: {} test sequences": "头 {}：{} 个测试序列",
        "softmax({}), d = {}": "softmax({})，d = {}",
        "dot product": "点积",
    }
    patterns = language.patterns_of(entries)
    assert [t for _, t in patterns][:2] == ["头 {}：{} 个测试序列", "softmax({})，d = {}"]
    monkeypatch.setattr(language, "catalog", lambda _: (entries, patterns))
    assert language.translate("keys") == "键"
    assert language.translate("head 2") == "头 2"
    assert language.translate("head 2: 500 test sequences") == "头 2：500 个测试序列"
    assert language.translate("softmax(dot product), d = 64") == "softmax(点积)，d = 64"
    for neutral in ("0.5", "$\\sigma = 1$", "q", "−1", ""):
        assert language.translate(neutral) == neutral
    assert language.untranslated == set()
    assert language.translate("values") == "values"
    assert language.untranslated == {"values"}


def test_the_real_catalog_orders_patterns_most_specific_first(chinese):
    _, patterns = language.catalog("zh_CN")
    fixed = [
        len(re.sub(r"\\(.)", r"\1", p.pattern.replace("(.+?)", ""), flags=re.S))
        for p, _ in patterns
    ]
    assert fixed == sorted(fixed, reverse=True)


def test_a_missing_text_is_logged_once(chinese, monkeypatch, tmp_path):
    log = tmp_path / "untranslated.txt"
    monkeypatch.setenv(language.LOG_VARIABLE, str(log))
    for _ in range(2):
        language.translate("no such label\nin two lines")
    assert log.read_text(encoding="utf-8") == '"no such label\\nin two lines"\n'


def test_a_phrase_of_the_helpers_is_looked_up_in_its_context(chinese):
    assert language.phrase("{} against {}", "权重", "键") == "权重与键的关系"
    assert language.translate("a plot") == "a plot" and "a plot" in language.untranslated


DRAW = r"""
import json, warnings
import matplotlib
matplotlib.use("Agg")
import helpers
import matplotlib.pyplot as plt
from helpers.figures import language
from helpers.figures.widgets import slider_figure

def render(sigma):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, sigma], label="own key left out")
    ax.set(xlabel="epoch", ylabel="mean squared error", title=f"attention weights, $w = {sigma}$")
    ax.legend()
    return fig

live = slider_figure(render, [0.5, 1.0], description="bandwidth σ")
fig = render(2)
print(json.dumps({
    "title": fig.axes[0].get_title(), "legend": fig.axes[0].get_legend().texts[0].get_text(),
    "description": live.children[0].description, "alt": live.alts[0],
    "family": matplotlib.rcParams["font.family"], "untranslated": sorted(language.untranslated),
}))
"""


def _draw(env: dict) -> tuple[dict, str]:
    run = subprocess.run(
        [sys.executable, "-c", DRAW], capture_output=True, text=True, env=env, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), run.stderr


@pytest.mark.slow
def test_a_chinese_interpreter_draws_chinese_text_in_a_cjk_font(chinese):
    import os

    if language._cjk_font() is None:
        pytest.fail("no CJK font installed: apt-get install fonts-noto-cjk (.ci/run does)")
    drawn, stderr = _draw({**os.environ, language.VARIABLE: "zh_CN"})
    han = re.compile("[\u4e00-\u9fff]")
    title = language.translate("attention weights, $w = 2$")
    assert han.search(title) and title.endswith("$w = 2$") and drawn["title"] == title, drawn
    assert drawn["description"] == language.translate("bandwidth σ"), drawn
    assert drawn["legend"] == language.translate("own key left out"), drawn
    assert drawn["untranslated"] == [] and language.untranslated == set(), drawn
    ending = language.phrase("{}, at {} = {}", "", drawn["description"], "0.5")
    assert drawn["alt"].endswith(ending) and "against" not in drawn["alt"], drawn
    assert drawn["family"][0] in language.CJK_FONTS, drawn  # first: mathtext has no fallback
    assert "Glyph" not in stderr and "missing from" not in stderr, stderr


@pytest.mark.slow
def test_without_a_cjk_font_the_figures_stay_english_and_say_why(monkeypatch, tmp_path):
    import os

    # An interpreter whose matplotlib knows no CJK font, installed or not.
    sitecustomize = tmp_path / "sitecustomize.py"
    sitecustomize.write_text(
        "import matplotlib.font_manager as fm\n"
        "fm.fontManager.ttflist = [f for f in fm.fontManager.ttflist if 'CJK' not in f.name]\n"
        "fm.findSystemFonts = lambda *args, **kwargs: []\n",
        encoding="utf-8",
    )
    env = {**os.environ, language.VARIABLE: "zh_CN", "PYTHONPATH": str(tmp_path)}
    drawn, stderr = _draw(env)
    assert drawn["title"] == "attention weights, $w = 2$", drawn
    assert "no font with Chinese characters" in stderr and "fonts-noto-cjk" in stderr, stderr


@pytest.mark.slow
def test_the_wheel_carries_the_catalog(tmp_path):
    """Colab installs the helpers from git, as a wheel: the catalog must be in it, or the
    Chinese notebooks would draw English figures there without a word."""
    root = Path(__file__).resolve().parents[1]
    source = tmp_path / "source"  # a clean copy: no egg-info left over from an earlier build
    shutil.copytree(
        root / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(root / name, source / name)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "helpers/figures/zh_CN.po" in names, sorted(n for n in names if "figures" in n)
