"""The Chinese notebooks: each translated chapter as a notebook, for Colab and download.

Written from the English notebook and the page's catalog (``locales/zh_CN/LC_MESSAGES``) into
``locales/zh_CN/notebooks/<page>.ipynb`` (``make catalogs`` writes them; ``python
book/tools/zh.py notebooks`` alone, after translating). Every Markdown cell is translated as
the Chinese edition translates it: the cell's plain links are turned into the roles the book
is built from (book/_ext/plain_links.py), each paragraph, heading, list item and table cell is
replaced by its catalog entry, and the roles are written back as plain links, pointing at the
same files as the English notebook's (a Chinese notebook's links to other translated
notebooks stay within ``locales/zh_CN/notebooks``). The code cells are the English ones,
unchanged (the bootstrap cell works the same in Colab), after one of its own,
``LANGUAGE_CELL``, which sets ``BOOK_LANG=zh_CN``: from then on the figures' text and slider
labels are Chinese (src/helpers/figures/language.py). The notebook is committed executed, as
the English ones are: ``make execute`` executes it after the English notebook, and the
Chinese edition's pages show its outputs (book/_ext/bilingual.py). Written again, it keeps the
outputs of the committed file while its code is the same, and has none once the code changed.

The Chinese pages' Colab buttons open these files from the repository, and their download
buttons serve them (book/_ext/bilingual.py copies them over the English ones in the Chinese
edition's ``_sources``). tests/test_zh.py checks that the committed files are what this
module writes today, and that every message of a page's catalog lands in its notebook.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import posixpath
import re
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGE = "zh_CN"
CATALOGS = ROOT / "locales" / LANGUAGE / "LC_MESSAGES"
NOTEBOOKS = ROOT / "locales" / LANGUAGE / "notebooks"
#: The HTML labels gettext cannot reach (raw HTML blocks): the Chinese edition's words for them.
HTML_LABELS = {"<summary>Solution</summary>": "<summary>参考答案</summary>"}
#: The Chinese notebook's first code cell: the figures' text in Chinese from then on
#: (src/helpers/figures/language.py reads the variable when the helpers are imported).
LANGUAGE_CELL = {
    "cell_type": "code",
    "execution_count": None,
    "id": "figure-language",
    "metadata": {},
    "outputs": [],
    "source": [
        "# 图中文字与滑块标签用中文（helpers.figures.language）。这需要一种中文字体：没有时图保持英文。\n",
        "# 在 Colab 或 Debian/Ubuntu 上可先运行 !apt-get -qq install -y fonts-noto-cjk 再运行本笔记本。\n",
        "import os\n",
        "\n",
        'os.environ["BOOK_LANG"] = "zh_CN"',
    ],
}
MARKDOWN_LINK = re.compile(r"(?<!\\)(\]\()([^()\s]+)(\))")


@cache
def _links_tool():
    name = "_book_tools_myst_links"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "book/tools/myst_links.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@cache
def _parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    extensions = {"colon_fence", "dollarmath", "amsmath", "deflist"}  # as _config.yml
    return create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML)


def message_id(content: str) -> str:
    """The msgid Sphinx's gettext builder gives a paragraph: its source on one line."""
    return " ".join(line.strip() for line in content.splitlines()).strip()


def translate_markdown(text: str, lookup) -> tuple[str, list[str]]:
    """``text`` (Markdown with MyST roles) with every paragraph, heading, list item and table
    cell that ``lookup(msgid)`` translates replaced by its translation, on one line.
    Returns the text and the msgids it looked up (translated or not)."""
    lines = text.split("\n")
    replace: dict[int, tuple[int, str]] = {}  # first line -> (end line, new first line)
    inline_edits: dict[int, list[tuple[str, str]]] = {}  # line -> [(old, new)] within it
    asked: list[str] = []
    block_map, previous = None, None
    for token in _parser().parse(text):
        opened, previous = previous, token.type
        if token.map is not None and token.type != "inline":
            block_map = token.map
        if token.type != "inline" or not token.content.strip():
            continue
        msgid = message_id(token.content)
        asked.append(msgid)
        translation = lookup(msgid)
        if not translation:
            continue
        if opened not in ("th_open", "td_open"):  # a paragraph, heading or term
            start, end = token.map
            first = token.content.split("\n", 1)[0].strip()
            at = lines[start].find(first)
            if at < 0:
                raise ValueError(f"cannot place {first!r} in line {lines[start]!r}")
            replace[start] = (end, lines[start][:at] + translation)
        else:  # a table cell: replaced within its row
            inline_edits.setdefault(block_map[0], []).append((token.content.strip(), translation))
    out, i = [], 0
    while i < len(lines):
        if i in replace:
            end, new = replace[i]
            out.append(new)
            i = max(end, i + 1)
            continue
        line = lines[i]
        at = 0
        for old, new in inline_edits.get(i, []):
            found = line.find(old, at)
            if found < 0:
                raise ValueError(f"cannot place table cell {old!r} in {line!r}")
            line = line[:found] + new + line[found + len(old) :]
            at = found + len(new)
        out.append(line)
        i += 1
    text = "\n".join(out)
    for english, chinese in HTML_LABELS.items():
        text = text.replace(english, chinese)
    return text, asked


def _relink(text: str, docdir: str, zh_docdir: str, translated: set[str]) -> str:
    """Relative links written for ``docdir`` (the English notebook's folder), rewritten for
    the Chinese notebook's folder: to a translated notebook, its Chinese twin; to anything
    else, the project's own file."""

    def link(match: re.Match) -> str:
        target, fragment = _links_tool().resolve(match.group(2), docdir)
        if not target:  # a URL or an anchor in the page
            return match.group(0)
        if target.endswith(".ipynb") and target.removesuffix(".ipynb") in translated:
            new = posixpath.relpath(target, docdir or ".")  # the same place among the twins
        else:
            new = posixpath.relpath(target, zh_docdir)
        return f"{match.group(1)}{new}{'#' + fragment if fragment else ''}{match.group(3)}"

    return MARKDOWN_LINK.sub(link, text)


def read_catalog(page: str):
    from babel.messages.pofile import read_po

    with (CATALOGS / f"{page}.po").open("rb") as f:
        return read_po(f, locale=LANGUAGE)


def chinese_notebook(page: str, translated: set[str]) -> tuple[str, list[str]]:
    """The Chinese notebook of ``page`` (e.g. 'chapters/05_self_attention') as text, and the
    msgids of its catalog that no Markdown cell used (figures' alt texts, from the outputs)."""
    tool = _links_tool()
    catalog = read_catalog(page)

    def lookup(msgid: str) -> str | None:
        message = catalog.get(msgid)
        if message is None or message.fuzzy or not message.string:
            return None
        return message.string

    nb = json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
    docdir = posixpath.dirname(page)
    zh_docdir = posixpath.join(NOTEBOOKS.relative_to(ROOT).as_posix(), docdir)
    used: set[str] = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"])
            roles, problems = tool.to_roles(source, docdir)
            if problems:
                raise ValueError(f"{page}: {problems}")
            chinese, asked = translate_markdown(roles, lookup)
            used.update(asked)
            links = _relink(tool.to_links(chinese, docdir), docdir, zh_docdir, translated)
            cell["source"] = links.splitlines(keepends=True)
    first_code = next(i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code")
    nb["cells"].insert(first_code, copy.deepcopy(LANGUAGE_CELL))
    _keep_outputs(nb, NOTEBOOKS / f"{page}.ipynb")
    nb["metadata"]["language_info"] = copy.deepcopy(nb["metadata"].get("language_info", {}))
    nb["metadata"]["book"] = {"language": "zh-Hans", "source": f"{page}.ipynb"}
    unused = [m.id for m in catalog if m.id and m.id not in used]
    return tool.dump(nb), unused


def code_sources(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def take_outputs(nb: dict, executed: dict, skip: int = 0) -> bool:
    """Give ``nb``'s code cells the outputs and execution counts of ``executed``'s code cells
    after its first ``skip``, and ``nb`` its widget state, when that code is ``nb``'s and was
    executed. Returns whether it did; ``nb`` is left as it was otherwise."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    done = [c for c in executed["cells"] if c["cell_type"] == "code"][skip:]
    same = code_sources(nb) == ["".join(c["source"]) for c in done]
    if not same or any(c["execution_count"] is None for c in done):
        return False
    for cell, source in zip(code, done):
        cell["outputs"], cell["execution_count"] = source["outputs"], source["execution_count"]
    nb["metadata"].pop("widgets", None)
    if "widgets" in executed["metadata"]:
        nb["metadata"]["widgets"] = executed["metadata"]["widgets"]
    return True


def _keep_outputs(nb: dict, previous: Path) -> None:
    """Give ``nb`` the outputs of the committed Chinese notebook ``previous``, executed by
    book/tools/execute.py with its figures in Chinese, when its code is the same; else none:
    it must be executed again."""
    old = json.loads(previous.read_text(encoding="utf-8")) if previous.is_file() else None
    if old is None or not take_outputs(nb, old):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        nb["metadata"].pop("widgets", None)


def translated_notebooks() -> list[str]:
    """The notebook pages of the Chinese edition (_toc.zh.yml), e.g. 'book/intro'."""
    import yaml

    sys.path.insert(0, str(ROOT / "book/tools"))
    from zh import toc_files

    toc = yaml.safe_load((ROOT / "_toc.zh.yml").read_text(encoding="utf-8"))
    pages = [str(Path(p).with_suffix("")) for p in toc_files(toc)]
    return [p for p in pages if (ROOT / f"{p}.ipynb").is_file()]


def write_all(check: bool = False) -> list[str]:
    """Write (or with ``check``, compare) every Chinese notebook; one line per notebook."""
    pages = translated_notebooks()
    lines = []
    for page in pages:
        text, unused = chinese_notebook(page, set(pages))
        path = NOTEBOOKS / f"{page}.ipynb"
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        state = "unchanged" if old == text else ("differs" if check else "written")
        if not check and old != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        lines.append(f"{path.relative_to(ROOT)}: {state} ({len(unused)} messages from outputs)")
    return lines


if __name__ == "__main__":
    for line in write_all(check="--check" in sys.argv):
        print(line)
