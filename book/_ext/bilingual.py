"""Sphinx extension: one book in two languages (English at the site's root, Chinese in zh/).

Both editions load it; ``language`` (zh_CN in the Chinese edition's config, written by
``book/tools/zh.py config``) says which one is being built.

1. The language switch. Every page gets a link in its header to the same page in the other
   edition, relative (``zh/book/glossary.html`` from ``book/glossary.html``, and back with
   ``../``), so it works offline, from file:// and under any sub-path, and
   ``<link rel="alternate" hreflang="...">`` tags for both editions. An English page without a
   translation yet (not in ``_toc.zh.yml``) links to the Chinese edition's home page instead,
   and says so ("中文版首页", "中文" on a phone); it gets no hreflang tags.
2. The Chinese edition's chrome: the search box's placeholder (Jupyter Book 1 fixes it in
   English through ``html_theme_options``, which is extended here, not replaced), and
   Sphinx's Chinese search with the glossary's Chinese terms as jieba's user dictionary, so
   that 多头注意力 and 自注意力 are indexed as words.
3. Never out of step. Before Sphinx translates a page (its ``Locale`` transform), the page's
   messages are counted against its catalog ``locales/zh_CN/LC_MESSAGES/<page>.po``:
   translated, fuzzy (the English changed and ``make catalogs`` kept the old translation), or
   untranslated (new, or changed since the catalog was last updated). The counts are written
   to ``_static/translation-status.json`` (``make book`` prints them; tests/test_zh.py fails
   on any page behind), and a page with a fuzzy or untranslated message shows a note, with a
   link to the English page, above its text.
4. Chinese notebooks. The Chinese edition's download buttons serve the Chinese notebooks
   (``locales/zh_CN/notebooks``, written by ``book/tools/zh_notebooks.py``; its Colab buttons
   open them from the repository, through ``path_to_book`` in its config), and the labels of
   raw HTML that gettext cannot reach (``<summary>Solution</summary>``) are given in Chinese.
5. Figures in Chinese. A Chinese notebook is executed with its figures' text and slider labels
   in Chinese (book/tools/execute.py; src/helpers/figures/language.py). When a page is read,
   the Chinese edition takes its code cells' outputs and its widget state (the live figures'
   frames) from that notebook; the Markdown stays the English source, which the catalogs
   translate. Where the Chinese notebook's code is not the English code (the English changed
   and ``make execute`` has not run since), the page keeps the English outputs, and the
   translation status counts it (``figures_behind``).
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import yaml
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.nodes import extract_messages

logger = logging.getLogger(__name__)

ZH_TOC = "_toc.zh.yml"
ZH_FOLDER = "zh"
SEARCH_PLACEHOLDER = "搜索本书……"
# The glossary's Chinese name of a term: the bold text that opens its definition.
GLOSSARY_NAME = re.compile(r"^  \*\*(.+?)\*\*", re.M)
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")


def is_chinese(app: Sphinx) -> bool:
    return (app.config.language or "").startswith("zh")


def translated_pages(confdir: Path) -> set[str]:
    """The pages of the Chinese edition: the files of _toc.zh.yml."""
    path = confdir / ZH_TOC
    if not path.is_file():
        return set()
    toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    pages = {toc["root"]}
    for part in toc.get("parts", []):
        pages |= {c["file"] for c in part.get("chapters", []) if "file" in c}
    return {str(Path(p).with_suffix("")) for p in pages}


def glossary_words(glossary: str) -> list[str]:
    """The Chinese terms of the glossary, each a word for jieba: the bold name and the
    alternatives after it (``sigmoid函数（S型函数）`` gives both), without spaces."""
    words = []
    for name in GLOSSARY_NAME.findall(glossary):
        for piece in re.split(r"[（）()、/，,；;]", name):
            piece = re.sub(r"\s+", "", piece)
            if HAN.search(piece) and piece not in words:
                words.append(piece)
    return words


# --- 1. The switch


def switch_for(pagename: str, chinese: bool, translated: set[str], root_doc: str) -> dict:
    """The switch's link, text and hreflang tags for one page (relative URLs)."""
    up = "../" * pagename.count("/")
    if chinese:
        english = f"{up}../{pagename}.html"
        chinese_url = f"{pagename.rsplit('/', 1)[-1]}.html"
        return {
            "url": english,
            "text": "English",
            "lang": "en",
            "title": "Read this page in English",
            "alternates": {"en": english, "zh-CN": chinese_url},
        }
    if pagename in translated:
        url = f"{up}{ZH_FOLDER}/{pagename}.html"
        return {
            "url": url,
            "text": "中文",
            "lang": "zh-CN",
            "title": "阅读本页的中文版",
            "alternates": {"en": f"{pagename.rsplit('/', 1)[-1]}.html", "zh-CN": url},
        }
    return {
        "url": f"{up}{ZH_FOLDER}/{root_doc}.html",
        # on a phone only "中文" shows (book.css): a chapter's header has no room for more
        "text": "中文",
        "more": "版首页",
        "lang": "zh-CN",
        "title": "本页尚无中文翻译：打开中文版首页",
        "alternates": {},
    }


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if app.builder.format != "html":
        return
    translated = app.env.bilingual_translated
    if doctree is None:  # search.html, genindex.html: each edition has its own
        translated = translated | {pagename}
    switch = switch_for(pagename, is_chinese(app), translated, app.config.root_doc)
    context["language_switch"] = switch
    tags = "".join(
        f'<link rel="alternate" hreflang="{lang}" href="{url}" />\n'
        for lang, url in switch["alternates"].items()
    )
    context["metatags"] = context.get("metatags", "") + tags
    if is_chinese(app) and pagename == app.config.root_doc and context.get("body"):
        pages = untranslated_pages(Path(app.confdir), app.env.bilingual_translated)
        context["body"] = TOCTREE_END.sub(
            lambda m: m.group(0) + untranslated_note(pages, "../" * pagename.count("/") + "../"),
            context["body"],
            count=1,
        )
    if is_chinese(app):
        status = app.env.bilingual_status.get(pagename)
        behind = status and (status["fuzzy"] + status["untranslated"])
        if behind and context.get("body"):
            context["body"] = behind_note(behind, switch["url"]) + context["body"]


# The end of the root page's table of contents (a toctree wrapper holds no nested <div>).
TOCTREE_END = re.compile(r'<div class="toctree-wrapper compound">.*?</div>\n?', re.S)


def notebook_title(path: Path) -> str:
    """A notebook's title: the first level-1 heading of its Markdown cells."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def untranslated_pages(confdir: Path, translated: set[str]) -> list[tuple[str, str]]:
    """The pages of _toc.yml that have no translation yet, with their English titles."""
    toc = yaml.safe_load((confdir / "_toc.yml").read_text(encoding="utf-8"))
    pages = []
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            page = str(Path(chapter.get("file", "")).with_suffix(""))
            if not page or page in translated:
                continue
            source = confdir / f"{page}.ipynb"
            title = page
            if source.is_file():
                title = notebook_title(source) or page
            pages.append((page, title))
    return pages


def untranslated_note(pages: list[tuple[str, str]], to_root: str) -> str:
    """The Chinese home page's list of the chapters still to be translated, linking to the
    English pages (``to_root``: the relative path from the page to the site's root)."""
    if not pages:
        return ""
    items = "".join(
        f'<li><a href="{to_root}{page}.html" hreflang="en" lang="en">{html.escape(title)}</a></li>'
        for page, title in pages
    )
    return (
        '<div class="admonition note untranslated-pages">'
        '<p class="admonition-title">尚未翻译的章节</p>'
        "<p>以下各章正在改写，改写完成后再译成中文；在此之前请阅读英文版"
        "（每页右上角的“中文版首页”按钮会带你回到这里）：</p>"
        f"<ul>{items}</ul></div>\n"
    )


def behind_note(behind: int, english_url: str) -> str:
    return (
        '<div class="admonition warning translation-behind" role="note">'
        '<p class="admonition-title">本页的翻译落后于英文版</p>'
        f"<p>英文原文有 {behind} 处改动尚未译出，这些段落暂以英文显示。"
        f'请以<a href="{english_url}" hreflang="en">英文版</a>为准。</p></div>\n'
    )


# --- 2. Chinese chrome and search


def _config_inited(app: Sphinx, config) -> None:
    if not (config.language or "").startswith("zh"):
        return
    options = dict(config.html_theme_options or {})
    options["search_bar_text"] = SEARCH_PLACEHOLDER
    config.html_theme_options = options
    glossary = Path(app.confdir) / "book" / "glossary.md"
    words = glossary_words(glossary.read_text(encoding="utf-8"))
    userdict = Path(app.doctreedir).parent / "jieba-glossary.txt"
    userdict.parent.mkdir(parents=True, exist_ok=True)
    userdict.write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(userdict)}


class _Terms(set):
    """A set that takes ``extend``: what Sphinx's Chinese splitter keeps its Latin words in."""

    def extend(self, words) -> None:
        self.update(words)


def _fast_chinese_stemmer() -> None:
    """Sphinx's Chinese search (``sphinx.search.zh.SearchChinese``) appends every Latin word of
    every page to a list, ``latin_terms``, and its ``stem`` asks ``word in latin_terms`` for
    every word: quadratic, 24 of the edition's 42 s of build with twelve chapters. A set gives
    the same answers at once."""
    from sphinx.search import zh as search_zh

    if isinstance(search_zh.SearchChinese.latin_terms, list):
        search_zh.SearchChinese.latin_terms = _Terms(search_zh.SearchChinese.latin_terms)


# --- 3. Translation status


class CountMessages(SphinxTransform):
    """Each page's translatable messages, before Sphinx's Locale transform (priority 20)
    replaces them with their translations."""

    default_priority = 19

    def apply(self, **kwargs) -> None:
        if not (self.config.language or "").startswith("zh"):
            return
        messages = [msg for _, msg in extract_messages(self.document)]
        self.env.bilingual_messages[self.env.docname] = messages


def _notebooks_tool():
    """book/tools/zh_notebooks.py: where the Chinese notebooks are, the HTML labels."""
    name = "_book_tools_zh_notebooks"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "tools" / "zh_notebooks.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class ChineseHtmlLabels(SphinxTransform):
    """Raw HTML labels (an exercise's "Solution" summary) in Chinese, in the Chinese edition."""

    default_priority = 21  # after the Locale transform

    def apply(self, **kwargs) -> None:
        from docutils import nodes

        if not (self.config.language or "").startswith("zh"):
            return
        labels = _notebooks_tool().HTML_LABELS
        for node in self.document.findall(nodes.raw):
            text = node.astext()
            new = text
            for english, chinese in labels.items():
                new = new.replace(english, chinese)
            if new != text:
                node.replace(node.children[0], nodes.Text(new))


# The header buttons' words that sphinx-book-theme translates from its own catalog (which
# Sphinx's locale_dirs do not reach), or translates as Taiwan writes them.
BUTTON_WORDS = {
    "Launch on Colab": "在 Colab 中打开",
    "Launch interactive content": "启动交互式内容",
    "列印成 PDF": "打印为 PDF",
}


def _chinese_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree):
    """The header buttons' tooltips and labels in the Chinese edition's words."""
    if app.builder.format != "html" or not is_chinese(app):
        return

    def visit(buttons):
        for button in buttons or []:
            for key in ("tooltip", "label"):
                if button.get(key) in BUTTON_WORDS:
                    button[key] = BUTTON_WORDS[button[key]]
            visit(button.get("buttons"))

    visit(context.get("header_buttons"))


def _chinese_notebooks(app: Sphinx, exception) -> None:
    """The download buttons' notebooks (``_sources``) replaced by the Chinese ones."""
    if exception is not None or app.builder.format != "html" or not is_chinese(app):
        return
    folder = _notebooks_tool().NOTEBOOKS
    for path in sorted(folder.rglob("*.ipynb")):
        target = Path(app.outdir) / "_sources" / path.relative_to(folder)
        if target.is_file():  # a page of this edition
            shutil.copyfile(path, target)


def with_chinese_outputs(english: dict, chinese: dict) -> dict | None:
    """``english`` (a notebook) with the outputs of ``chinese``, its executed Chinese twin,
    whose code is the same after a first cell of its own (``LANGUAGE_CELL``); None when the
    code differs or the twin was not executed."""
    tool = _notebooks_tool()
    first = tool.code_sources(chinese)[:1]
    if first != ["".join(tool.LANGUAGE_CELL["source"])]:
        return None
    return english if tool.take_outputs(english, chinese, skip=1) else None


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    """In the Chinese edition, a notebook page's outputs from its executed Chinese twin."""
    if not is_chinese(app):
        return
    twin = _notebooks_tool().NOTEBOOKS / f"{docname}.ipynb"
    if not twin.is_file() or not app.env.doc2path(docname).endswith(".ipynb"):
        return
    app.env.note_dependency(str(twin))
    chinese = json.loads(twin.read_text(encoding="utf-8"))
    merged = with_chinese_outputs(json.loads(source[0]), chinese)
    if merged is None:
        app.env.bilingual_figures_behind.add(docname)
    else:
        source[0] = json.dumps(merged, ensure_ascii=False)


def catalog_status(messages: list[str], po_path: Path) -> dict[str, int]:
    """How many of a page's messages its catalog translates, has fuzzy, or lacks."""
    from babel.messages.pofile import read_po

    catalog = None
    if po_path.is_file():
        with po_path.open("rb") as f:
            catalog = read_po(f)
    counts = {"translated": 0, "fuzzy": 0, "untranslated": 0}
    for msg in messages:
        entry = catalog.get(msg) if catalog is not None else None
        if entry is not None and entry.fuzzy:
            counts["fuzzy"] += 1
        elif entry is not None and entry.string:
            counts["translated"] += 1
        else:
            counts["untranslated"] += 1
    return counts


def _env_before_read(app: Sphinx, env, docnames) -> None:
    env.bilingual_translated = translated_pages(Path(app.confdir))
    if not hasattr(env, "bilingual_messages"):
        env.bilingual_messages = {}
    env.bilingual_status = {}
    if not hasattr(env, "bilingual_figures_behind"):
        env.bilingual_figures_behind = set()
    env.bilingual_figures_behind -= set(docnames)


def _env_purge(app: Sphinx, env, docname: str) -> None:
    getattr(env, "bilingual_messages", {}).pop(docname, None)
    getattr(env, "bilingual_figures_behind", set()).discard(docname)


def _env_merge(app: Sphinx, env, docnames, other) -> None:
    for docname in docnames:
        if docname in getattr(other, "bilingual_messages", {}):
            env.bilingual_messages[docname] = other.bilingual_messages[docname]
        if docname in getattr(other, "bilingual_figures_behind", set()):
            env.bilingual_figures_behind.add(docname)


def _env_updated(app: Sphinx, env) -> list[str]:
    if not is_chinese(app):
        return []
    folder = Path(app.srcdir) / app.config.locale_dirs[0] / app.config.language / "LC_MESSAGES"
    env.bilingual_status = {
        docname: {
            **catalog_status(env.bilingual_messages.get(docname, []), folder / f"{docname}.po"),
            "figures_behind": int(docname in env.bilingual_figures_behind),
        }
        for docname in sorted(env.found_docs)
    }
    return []


def _write_status(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html" or not is_chinese(app):
        return
    out = Path(app.outdir) / "_static" / "translation-status.json"
    out.write_text(json.dumps(app.env.bilingual_status, indent=1), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    _fast_chinese_stemmer()
    app.connect("config-inited", _config_inited)
    app.connect("env-before-read-docs", _env_before_read)
    app.connect("env-purge-doc", _env_purge)
    app.connect("env-merge-info", _env_merge)
    app.connect("env-updated", _env_updated)
    app.connect("source-read", _source_read)
    app.connect("html-page-context", _page_context)
    app.connect("html-page-context", _chinese_buttons, priority=900)  # after the theme's
    app.connect("build-finished", _write_status)
    app.connect("build-finished", _chinese_notebooks)
    app.add_transform(CountMessages)
    app.add_transform(ChineseHtmlLabels)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
