"""The Chinese edition (中文版): catalogs, the language switch, hreflang, search, status.

* The catalogs of the pages in _toc.zh.yml are complete: no message untranslated or fuzzy
  (``make catalogs`` marks a changed English paragraph fuzzy; this test then fails until the
  translation is updated), and the built edition's own count agrees
  (``zh/_static/translation-status.json``, which also counts paragraphs changed after the
  catalogs were last refreshed).
* The status and the note: a message missing from a catalog counts as untranslated, a fuzzy
  one as fuzzy, and a page with either shows the "behind the English" note.
* The switch and the hreflang tags of every built page point at its twin (or, for an
  English page without a translation, at the Chinese home page), by relative links that exist.
* In Chromium, offline, at the root and under a sub-path: the switch opens the same page both
  ways; searching 多头注意力 finds the glossary; no request leaves 127.0.0.1 on a Chinese page.
* The Chinese notebooks (locales/zh_CN/notebooks, for Colab and download) are what
  book/tools/zh_notebooks.py writes from today's catalogs: a first cell that puts the figures
  in Chinese, then the English code cells, executed since the code last changed, and no
  English text left where the catalog translates it; the Chinese pages' Colab and download
  buttons lead to them, and an exercise's "Solution" reads 参考答案.
"""

from __future__ import annotations

import importlib.util
import json
import posixpath
import re
import sys
import textwrap
import urllib.parse
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
ZH_SITE = SITE / "zh"
CATALOGS = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"

pytestmark = pytest.mark.book


def _load(name: str, path: Path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


zh = _load("_book_tools_zh", ROOT / "book" / "tools" / "zh.py")
zh_notebooks = _load("_book_tools_zh_notebooks", ROOT / "book" / "tools" / "zh_notebooks.py")
bilingual = _load("_book_ext_bilingual", ROOT / "book" / "_ext" / "bilingual.py")


def _zh_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.zh.yml").read_text(encoding="utf-8"))
    return [str(Path(p).with_suffix("")) for p in zh.toc_files(toc)]


def _catalog_pages() -> list[str]:
    """Every page with a catalog, translated yet or not (a chapter being translated is
    checked before it joins _toc.zh.yml); Sphinx's own catalog aside."""
    return sorted(
        str(po.relative_to(CATALOGS).with_suffix(""))
        for po in CATALOGS.rglob("*.po")
        if po.name != "sphinx.po"
    )


def _built(path: Path) -> str:
    if not path.is_file():
        pytest.skip(f"{path} not built: run `make book`")
    return path.read_text(encoding="utf-8")


# --- Catalogs and status


@pytest.mark.parametrize("page", _zh_pages())
def test_the_catalog_of_each_chinese_page_is_complete(page):
    po = CATALOGS / f"{page}.po"
    assert po.is_file(), f"{po.relative_to(ROOT)} missing: run `make catalogs` and translate it"
    counts = zh.count(po)
    assert counts["fuzzy"] == 0 and counts["untranslated"] == 0, (
        f"{page}: {zh.format_counts(counts)}: translate the new messages and review the fuzzy "
        f"ones in {po.relative_to(ROOT)} (then remove their '#, fuzzy' flag)"
    )
    assert counts["translated"] > 0


MATH = re.compile(r"\$\$.*?\$\$|\$[^$]+\$", re.S)
ROLE = re.compile(r"\{([a-z:]+)\}`([^`]*)`")
TARGET = re.compile(r"<([^<>]+)>\s*$")


def _role_key(name: str, content: str) -> str:
    """A role by what it points at: ``{term}`queries <query>``` and ``{term}`查询 <query>```
    are the same link, with other text."""
    target = TARGET.search(content)
    return f"{{{name}}}{(target.group(1) if target else content).strip()}"


def _glossary_names() -> dict[str, str]:
    """Each glossary headword (lower case, as {term} looks it up) -> its Chinese name."""
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    pairs = re.findall(r"^(\S[^\n]*)\n  \*\*(.+?)\*\*", text, re.M)
    return {term.strip().lower(): re.split(r"[（(]", name)[0].strip() for term, name in pairs}


CODE = re.compile(r"(?<![`}])`[^`]+`")


def _markup(text: str) -> dict:
    return {
        # sets: a translation may name a symbol twice where the English says "it"
        "maths": sorted(set(MATH.findall(text))),
        "roles": sorted({_role_key(n, c) for n, c in ROLE.findall(text)}),
        "code": sorted(set(CODE.findall(ROLE.sub("", text)))),
        "bold": text.count("**"),
    }


@pytest.mark.parametrize("page", _catalog_pages())
def test_a_translation_keeps_the_markup_of_its_english(page):
    """Every formula, role ({term}, {doc}, {cite:p}) and code span of a message is in its
    translation, unchanged, and nothing else of the kind; bold marks as many."""
    from babel.messages.pofile import read_po

    with (CATALOGS / f"{page}.po").open("rb") as f:
        catalog = read_po(f)
    wrong = [
        (message.id[:60], _markup(message.id), _markup(message.string))
        for message in catalog
        if message.id and message.string and _markup(message.id) != _markup(message.string)
    ]
    assert not wrong, f"{page}: markup changed in {len(wrong)} messages: {wrong[:3]}"


@pytest.mark.parametrize("page", _catalog_pages())
def test_a_translation_renders_the_emphasis_of_its_english(page):
    """Bold, italics, code and links render in the translation as in the English. CommonMark
    does not close ``**`` that follows punctuation and precedes a Chinese character
    (``**{term}`注意力 <attention>`**来自`` shows the asterisks), which the markup test,
    counting characters, cannot see: rendering both finds it."""
    from babel.messages.pofile import read_po
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark").use(dollarmath_plugin)
    with (CATALOGS / f"{page}.po").open("rb") as f:
        catalog = read_po(f)
    wrong = []
    for message in catalog:
        if not (message.id and message.string):
            continue
        english, chinese = md.render(message.id), md.render(message.string)
        for tag in ("<strong>", "<em>", "<code>", "<a "):
            if english.count(tag) != chinese.count(tag):
                wrong.append(
                    f"{tag} {english.count(tag)} -> {chinese.count(tag)}: {message.string[:70]!r}"
                )
    assert not wrong, f"{page}: {len(wrong)} messages render differently: {wrong[:4]}"


@pytest.mark.parametrize("page", _catalog_pages())
def test_a_glossary_link_reads_as_the_glossary_names_it(page):
    """Where the English links a glossary term, the translation's link text is the term's
    Chinese name as the glossary gives it (nndl and the Chinese d2l usage), never an
    alternative: ``{term}`queries <query>``` becomes ``{term}`查询 <query>```."""
    from babel.messages.pofile import read_po

    names = _glossary_names()
    with (CATALOGS / f"{page}.po").open("rb") as f:
        catalog = read_po(f)
    wrong = []
    for message in catalog:
        if not message.string:
            continue
        for name, content in ROLE.findall(message.string):
            if name != "term":
                continue
            target = TARGET.search(content)
            term = (target.group(1) if target else content).strip().lower()
            shown = TARGET.sub("", content).strip() if target else content.strip()
            if names.get(term) and names[term] not in shown:
                wrong.append(f"{content!r}: the glossary's name is {names[term]!r}")
    assert not wrong, f"{page}: {wrong[:5]}"


def test_the_chinese_part_captions_are_the_catalogs_translations():
    """_toc.zh.yml's captions are what the root page's catalog translates the English
    captions to (Sphinx extracts them from _toc.yml but does not apply them to the sidebar)."""
    from babel.messages.pofile import read_po

    english = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chinese = yaml.safe_load((ROOT / "_toc.zh.yml").read_text(encoding="utf-8"))
    caption_of = {c["file"]: part["caption"] for part in english["parts"] for c in part["chapters"]}
    with (CATALOGS / f"{Path(chinese['root']).with_suffix('')}.po").open("rb") as f:
        catalog = read_po(f)
    for part in chinese["parts"]:
        captions = {caption_of[c["file"]] for c in part["chapters"]}
        assert len(captions) == 1, f"{part['caption']}: pages of several English parts"
        message = catalog.get(captions.pop())
        assert message is not None and message.string == part["caption"], part["caption"]


@pytest.mark.parametrize("page", [p for p in _zh_pages() if p.startswith("chapters/")])
def test_a_chinese_chapter_shows_its_translated_title(page):
    """The page's heading is the catalog's translation of the English title. Sphinx applies a
    title's translation only if it parses back as a title: "2. 注意力汇聚" parses as a numbered
    list item in Markdown, and Sphinx then keeps the English silently (the status counts the
    message as translated), so a numbered title's translation escapes its period, "2\\. …"."""
    from babel.messages.pofile import read_po

    html = _built(ZH_SITE / f"{page}.html")
    english = bilingual.notebook_title(ROOT / f"{page}.ipynb")
    with (CATALOGS / f"{page}.po").open("rb") as f:
        chinese = read_po(f).get(english).string.replace("\\.", ".")
    heading = re.search(r"<h1>([^<]*)", html).group(1).strip()
    assert heading == chinese, f"{page}: the page's title is {heading!r}, not {chinese!r}"


def test_the_built_chinese_edition_is_not_behind_the_english():
    status = json.loads(_built(ZH_SITE / "_static" / "translation-status.json"))
    assert sorted(status) == sorted(_zh_pages())
    behind = {p: c for p, c in status.items() if c["fuzzy"] or c["untranslated"]}
    assert not behind, f"pages behind the English (make catalogs, then translate): {behind}"
    english = [p for p, c in status.items() if c["figures_behind"]]
    assert not english, f"pages whose figures are in English (run make execute): {english}"


def test_a_changed_or_new_paragraph_counts_and_shows_the_note(tmp_path):
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    catalog = Catalog(locale="zh_CN")
    catalog.add("Attention is a weighted average.", "注意力是一种加权平均。")
    catalog.add("Masks are boolean.", "掩码是布尔型的。", flags=["fuzzy"])
    po = tmp_path / "page.po"
    with po.open("wb") as f:
        write_po(f, catalog)
    messages = ["Attention is a weighted average.", "Masks are boolean.", "A new paragraph."]
    counts = bilingual.catalog_status(messages, po)
    assert counts == {"translated": 1, "fuzzy": 1, "untranslated": 1}, counts
    assert bilingual.catalog_status(messages, tmp_path / "missing.po")["untranslated"] == 3
    note = bilingual.behind_note(2, "../../book/glossary.html")
    assert "本页的翻译落后于英文版" in note and 'href="../../book/glossary.html"' in note


def test_catalog_update_marks_a_changed_paragraph_fuzzy(tmp_path):
    """What `make catalogs` does with babel: a changed English message keeps its old
    translation, flagged fuzzy; a new one is added untranslated."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    old = Catalog(locale="zh_CN")
    old.add("The scores go through a softmax.", "分数经过softmax。")
    (tmp_path / "pots" / "book").mkdir(parents=True)
    (tmp_path / "po" / "book").mkdir(parents=True)
    with (tmp_path / "po" / "book" / "intro.po").open("wb") as f:
        write_po(f, old)
    template = Catalog()
    template.add("The scores go through a softmax, so the weights sum to one.")
    template.add("A brand-new paragraph.")
    with (tmp_path / "pots" / "book" / "intro.pot").open("wb") as f:
        write_po(f, template)
    lines = zh.update_catalogs(tmp_path / "pots", tmp_path / "po")
    assert lines == ["book/intro: 0 translated, 1 fuzzy, 1 untranslated"], lines


def test_the_chinese_config_extends_the_english_one():
    english = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config = zh.zh_config(english)
    settings = config["sphinx"]["config"]
    assert settings["language"] == "zh_CN" and settings["html_search_language"] == "zh"
    assert settings["locale_dirs"] == ["locales"] and settings["gettext_compact"] is False
    # the theme options Jupyter Book writes (launch buttons, ...) must survive: the search
    # placeholder is set by book/_ext/bilingual.py, never by replacing html_theme_options
    assert "html_theme_options" not in settings
    assert config["launch_buttons"] == english["launch_buttons"]
    for path in config["sphinx"]["local_extensions"].values():
        assert Path(path).is_absolute() and Path(path).is_dir()


def test_the_glossary_gives_jieba_its_chinese_terms():
    words = bilingual.glossary_words((ROOT / "book" / "glossary.md").read_text(encoding="utf-8"))
    for term in (
        "多头注意力",
        "自注意力",
        "注意力掩码",
        "缩放点积注意力",
        "S型函数",
        "sigmoid函数",
    ):
        assert term in words, term
    assert all(" " not in w for w in words)


@pytest.mark.parametrize(
    "pagename, chinese, url",
    [
        ("book/glossary", False, "../zh/book/glossary.html"),
        ("book/glossary", True, "../../book/glossary.html"),
        ("book/intro", True, "../../book/intro.html"),
        ("chapters/04_masking", False, "../zh/book/intro.html"),  # no translation yet
        ("genindex", True, "../genindex.html"),
    ],
)
def test_the_switch_url_is_relative_and_names_the_same_page(pagename, chinese, url):
    translated = {"book/intro", "book/glossary"}
    switch = bilingual.switch_for(pagename, chinese, translated, "book/intro")
    assert switch["url"] == url
    if not chinese and pagename not in translated:
        assert switch["text"] + switch["more"] == "中文版首页" and switch["alternates"] == {}


# --- The built site: switch, hreflang, lang, placeholder

SWITCH = re.compile(r'<a href="([^"]+)" class="btn btn-sm btn-language-switch"')
ALTERNATE = re.compile(r'<link rel="alternate" hreflang="([^"]+)" href="([^"]+)" />')


def _site_pages(folder: Path, exclude: Path | None = None) -> list[Path]:
    return [
        p
        for p in folder.rglob("*.html")
        if "_static" not in p.parts
        and "_sources" not in p.parts
        and (exclude is None or exclude not in p.parents)
    ]


def _resolve(page: Path, href: str) -> Path:
    return (page.parent / urllib.parse.unquote(href.split("#")[0])).resolve()


def test_every_page_links_to_its_twin():
    _built(ZH_SITE / "book" / "intro.html")
    # search.html and genindex.html: each edition builds its own
    translated = set(_zh_pages()) | {"search", "genindex"}
    checked = 0
    for page in _site_pages(SITE, exclude=ZH_SITE) + _site_pages(ZH_SITE):
        html = page.read_text(encoding="utf-8")
        if 'http-equiv="Refresh"' in html or page.name == "404.html":
            continue  # index.html's redirect, the self-contained 404 page
        chinese = ZH_SITE in page.parents
        rel = page.relative_to(ZH_SITE if chinese else SITE).with_suffix("").as_posix()
        switch = SWITCH.search(html)
        assert switch, f"{page.relative_to(SITE)}: no language switch"
        target = _resolve(page, switch.group(1))
        if chinese:
            expected = SITE / f"{rel}.html"
        elif rel in translated:
            expected = ZH_SITE / f"{rel}.html"
        else:
            expected = ZH_SITE / "book" / "intro.html"
        assert target == expected.resolve(), f"{page.relative_to(SITE)}: switch -> {target}"
        assert target.is_file(), f"{page.relative_to(SITE)}: switch -> missing {target}"
        alternates = dict(ALTERNATE.findall(html))
        if chinese or rel in translated:
            assert set(alternates) == {"en", "zh-CN"}, (page, alternates)
            for lang, href in alternates.items():
                assert not href.startswith(("/", "http")), href
                assert _resolve(page, href).is_file(), (page, lang, href)
            assert _resolve(page, alternates["zh-CN" if chinese else "en"]) == page.resolve()
        else:
            assert alternates == {}, (page, alternates)
        checked += 1
    assert checked >= 10


def test_chinese_pages_are_marked_chinese_with_a_chinese_search_box():
    for page in ("book/intro.html", "book/glossary.html", "search.html"):
        html = _built(ZH_SITE / page)
        assert '<html lang="zh-CN"' in html, page
        assert 'placeholder="搜索本书……"' in html, page
    english = _built(SITE / "book" / "glossary.html")
    assert '<html lang="en"' in english and "搜索本书" not in english
    # the theme's words in Chinese (bilingual.BUTTON_WORDS, locales/zh_CN/.../sphinx.po)
    chapter = _built(ZH_SITE / "chapters" / "02_attention_pooling.html")
    for english_words in ("Launch on", "Launch interactive", "Link to this heading", "列印"):
        assert english_words not in chapter, english_words
    assert 'title="在 Colab 中打开"' in chapter and 'title="链接到此标题"' in chapter
    assert 'title="Launch on Colab"' in _built(SITE / "chapters" / "02_attention_pooling.html")


def test_the_chinese_home_lists_the_chapters_not_yet_translated():
    """A page of _toc.yml missing from _toc.zh.yml is listed on the Chinese home page, with a
    link to its English page; with every page translated there is no list."""
    note = bilingual.untranslated_note([("chapters/04_masking", "4. Masking")], "../../")
    assert "尚未翻译的章节" in note and 'href="../../chapters/04_masking.html"' in note
    assert (SITE / "chapters" / "04_masking.html").is_file() or not SITE.is_dir()
    html = _built(ZH_SITE / "book" / "intro.html")
    missing = bilingual.untranslated_pages(ROOT, set(_zh_pages()))
    assert ("尚未翻译的章节" in html) == bool(missing), missing
    for page, _ in missing:
        assert f'href="../../{page}.html"' in html, page


# --- In Chromium, offline

browser_tests = pytest.importorskip("test_browser")
browser = browser_tests.browser
server = browser_tests.server
_open = browser_tests._open


@pytest.mark.browser
@pytest.mark.parametrize(
    "start, twin",
    [
        ("book/glossary.html", "zh/book/glossary.html"),
        ("zh/book/notation.html", "book/notation.html"),
    ],
)
def test_the_switch_opens_the_same_page_in_the_other_language(browser, server, start, twin):
    opened = _open(browser, f"{server}/{start}")
    page = opened.page
    try:
        page.click("a.btn-language-switch")
        page.wait_for_load_state("networkidle")
        assert page.url == f"{server}/{twin}", page.url
        lang = page.evaluate("() => document.documentElement.lang")
        assert lang == ("zh-CN" if twin.startswith("zh/") else "en"), lang
        # and back again
        page.click("a.btn-language-switch")
        page.wait_for_load_state("networkidle")
        assert page.url == f"{server}/{start}", page.url
        assert opened.external == [] and opened.errors == [], (opened.external, opened.errors)
    finally:
        page.close()


@pytest.mark.browser
@pytest.mark.parametrize("query", ["多头注意力", "掩码", "注意力"])
def test_chinese_search_finds_the_glossary(browser, server, query):
    opened = _open(browser, f"{server}/zh/search.html?q={urllib.parse.quote(query)}")
    page = opened.page
    try:
        page.wait_for_selector("#search-results li, ul.search li", timeout=15000)
        hrefs = page.eval_on_selector_all(
            "#search-results li a, ul.search li a", "els => els.map(e => e.href)"
        )
        assert any("/zh/book/glossary.html" in h for h in hrefs), (query, hrefs)
        assert opened.external == [] and opened.errors == [], (opened.external, opened.errors)
    finally:
        page.close()


@pytest.mark.browser
def test_a_chinese_page_stays_offline(browser, server):
    opened = _open(browser, f"{server}/zh/book/intro.html")
    try:
        assert opened.external == [], opened.external
        assert opened.errors == [], opened.errors
        assert any("/zh/" in u for u in opened.requested)
    finally:
        opened.page.close()


# --- The Chinese notebooks (Colab and download)


def test_translate_markdown_replaces_each_block_and_keeps_its_marker():
    text = (
        "## Keys and values\n\n"
        "A query is\ncompared with *each* key.\n\n"
        "- first item,\n  on two lines;\n- second item.\n\n"
        "| name | kind |\n|---|---|\n| additive | learned |\n\n"
        "$$\nx = 1\n$$\n\n"
        "<details>\n<summary>Solution</summary>\n\nNo.\n\n</details>"
    )
    table = {
        "Keys and values": "键与值",
        "A query is compared with *each* key.": "查询与*每个*键比较。",
        "first item, on two lines;": "第一项；",
        "name": "名称",
        "additive": "加性",
        "learned": "可学习",
    }
    out, asked = zh_notebooks.translate_markdown(text, table.get)
    assert out == (
        "## 键与值\n\n"
        "查询与*每个*键比较。\n\n"
        "- 第一项；\n- second item.\n\n"
        "| 名称 | kind |\n|---|---|\n| 加性 | 可学习 |\n\n"
        "$$\nx = 1\n$$\n\n"
        "<details>\n<summary>参考答案</summary>\n\nNo.\n\n</details>"
    )
    assert "second item." in asked and "No." in asked


def test_the_chinese_notebooks_are_written_from_todays_catalogs():
    stale = [line for line in zh_notebooks.write_all(check=True) if ": unchanged" not in line]
    assert not stale, (
        "the Chinese notebooks are behind the English notebooks or the catalogs: run "
        f"`python book/tools/zh.py notebooks` (make catalogs does too): {stale}"
    )


def test_a_chinese_page_takes_its_twins_outputs_only_when_the_code_is_the_same():
    """The Chinese edition shows the executed twin's outputs and frames; a twin behind the
    English code, not executed, or without its language cell gives none (the page keeps the
    English outputs and counts as figures_behind)."""

    def notebook(*cells, widgets=None):
        nb = {"cells": [{"cell_type": "markdown", "source": ["# Title"]}], "metadata": {}}
        for source, outputs, count in cells:
            nb["cells"].append(
                {
                    "cell_type": "code",
                    "source": [source],
                    "outputs": outputs,
                    "execution_count": count,
                }
            )
        if widgets:
            nb["metadata"]["widgets"] = widgets
        return nb

    language = "".join(zh_notebooks.LANGUAGE_CELL["source"])
    english = notebook(("x = 1", ["en"], 1), ("plot(x)", ["en figure"], 2), widgets="en state")
    twin = notebook(
        (language, [], 1), ("x = 1", ["zh"], 2), ("plot(x)", ["zh figure"], 3), widgets="zh state"
    )
    merged = bilingual.with_chinese_outputs(json.loads(json.dumps(english)), twin)
    assert [c.get("outputs") for c in merged["cells"]] == [None, ["zh"], ["zh figure"]]
    assert merged["metadata"]["widgets"] == "zh state"
    behind = notebook((language, [], 1), ("x = 2", ["zh"], 2), ("plot(x)", ["zh figure"], 3))
    unexecuted = notebook((language, [], None), ("x = 1", [], None), ("plot(x)", [], None))
    no_language = notebook(("x = 1", ["zh"], 1), ("plot(x)", ["zh figure"], 2))
    for twin in (behind, unexecuted, no_language):
        assert bilingual.with_chinese_outputs(json.loads(json.dumps(english)), twin) is None


@pytest.mark.parametrize("page", zh_notebooks.translated_notebooks())
def test_a_chinese_notebook_runs_the_english_code_and_reads_chinese(page):
    english = json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
    path = zh_notebooks.NOTEBOOKS / f"{page}.ipynb"
    chinese = json.loads(path.read_text(encoding="utf-8"))
    language = [i for i, c in enumerate(chinese["cells"]) if c.get("id") == "figure-language"]
    first_code = next(i for i, c in enumerate(english["cells"]) if c["cell_type"] == "code")
    assert language == [first_code], "the figures' language is set before the bootstrap cell"
    assert chinese["cells"][first_code]["source"] == zh_notebooks.LANGUAGE_CELL["source"]
    cells = chinese["cells"][:first_code] + chinese["cells"][first_code + 1 :]
    assert [c["cell_type"] for c in cells] == [c["cell_type"] for c in english["cells"]]
    for en, cn in zip(english["cells"], cells):
        if en["cell_type"] == "code":  # the bootstrap cell included: the same code
            assert cn["source"] == en["source"], cn.get("id")
    # Executed, top to bottom, since its code last changed: its outputs are the Chinese
    # edition's (figures in Chinese), which the nbval run of `make test` re-creates.
    counts = [c["execution_count"] for c in chinese["cells"] if c["cell_type"] == "code"]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.relative_to(ROOT)} is not executed since its code changed: run make execute"
    )
    catalog = zh_notebooks.read_catalog(page)
    tool = zh_notebooks._links_tool()
    left = []
    for cell in chinese["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        roles, _ = tool.to_roles("".join(cell["source"]), posixpath.dirname(page))
        for token in zh_notebooks._parser().parse(roles):
            if token.type == "inline" and token.content.strip():
                message = catalog.get(zh_notebooks.message_id(token.content))
                if message is not None and message.string != message.id:
                    left.append(message.id[:80])
    assert not left, (
        f"{path.relative_to(ROOT)}: English left where the catalog translates it: {left}"
    )
    markdown = "".join(
        "".join(c["source"]) for c in chinese["cells"] if c["cell_type"] == "markdown"
    )
    assert "<summary>Solution</summary>" not in markdown


def test_chinese_pages_launch_and_download_the_chinese_notebook():
    for page in [p for p in zh_notebooks.translated_notebooks() if p.startswith("chapters/")]:
        html = _built(ZH_SITE / f"{page}.html")
        colab = re.findall(
            r'href="https://colab\.research\.google\.com/github/[^/]+/[^/]+/blob/[^/]+/([^"]+)"',
            html,
        )
        assert colab == [f"locales/zh_CN/notebooks/{page}.ipynb"], (page, colab)
        assert (ROOT / colab[0]).is_file()
        download = ZH_SITE / "_sources" / f"{page}.ipynb"
        assert f'_sources/{page}.ipynb"' in html and download.is_file(), page
        assert download.read_bytes() == (zh_notebooks.NOTEBOOKS / f"{page}.ipynb").read_bytes()
        assert "<summary>Solution</summary>" not in html and "<summary>参考答案</summary>" in html
        english = _built(SITE / f"{page}.html")
        assert f"blob/main/{page}.ipynb" in english and "参考答案" not in english


@pytest.mark.parametrize("folder", ["chapters", "book", "locales/zh_CN/notebooks/chapters"])
def test_the_bootstrap_cell_finds_the_clone_from_a_notebooks_folder(folder, monkeypatch):
    """Run from a notebook's folder in a clone (JupyterLab's working directory), the bootstrap
    cell installs the clone's helpers, for a Chinese notebook too."""
    bootstrap = _load("_book_tools_bootstrap", ROOT / "book" / "tools" / "bootstrap.py")
    cell = bootstrap.cell_source(bootstrap.repository_url())
    found = re.search(r"^    here = .*?None\)$", cell, re.M | re.S)
    assert found, "the bootstrap cell no longer finds the clone as this test expects"
    monkeypatch.chdir(ROOT / folder)
    scope = {"pathlib": __import__("pathlib")}
    exec(textwrap.dedent(found.group(0)), scope)
    assert scope["clone"] == str(ROOT.resolve())
