"""The Chinese edition (中文版): its configuration and its translation catalogs.

The English notebooks and pages are the one source. Their text is translated through
Sphinx's gettext catalogs, ``locales/zh_CN/LC_MESSAGES/<page>.po`` (one per page, the page's
path as its name: ``book/glossary.po``), and ``make book`` builds the Chinese edition from the
same sources with ``language: zh_CN`` into the site's ``zh/`` folder. Its table of contents is
``_toc.zh.yml``: the pages whose translation is complete, with Chinese part captions.

    python book/tools/zh.py config OUT     write the Chinese edition's Jupyter Book config to
                                           OUT: _config.yml plus the language settings
    python book/tools/zh.py catalogs       extract the messages of the pages in _toc.zh.yml
                                           (sphinx gettext) and update their catalogs: a new
                                           paragraph is added untranslated, a changed one keeps
                                           its old translation marked fuzzy, a removed one is
                                           kept as obsolete (#~); then writes the Chinese
                                           notebooks, as `notebooks` does
    python book/tools/zh.py notebooks      write the Chinese notebooks (for Colab and download)
                                           from the English ones and the catalogs, into
                                           locales/zh_CN/notebooks (book/tools/zh_notebooks.py)
    python book/tools/zh.py status FILE    print the per-page counts the build wrote to FILE

The Chinese build itself (book/_ext/bilingual.py) counts, for each page, its messages that are
translated, fuzzy or untranslated (a paragraph whose English changed after the catalog was
last updated counts as untranslated) and shows a note on a page that is behind the English.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCALES = "locales"
LANGUAGE = "zh_CN"
CATALOGS = ROOT / LOCALES / LANGUAGE / "LC_MESSAGES"
GETTEXT = ROOT / "_build" / "gettext"
NOTEBOOKS = ROOT / LOCALES / LANGUAGE / "notebooks"


def zh_config(english: dict) -> dict:
    """The Chinese edition's Jupyter Book configuration: the English one, in Chinese.

    Paths in it stay relative to the book's root, as Sphinx reads them, except the local
    extensions' folders, which Jupyter Book resolves against the config file's own folder:
    they are made absolute, so the file can be written anywhere (under _build)."""
    config = json.loads(json.dumps(english))  # a deep copy
    config["title"] = "注意力机制：交互式教材"
    sphinx = config.setdefault("sphinx", {})
    sphinx["local_extensions"] = {
        name: str((ROOT / path).resolve())
        for name, path in sphinx.get("local_extensions", {}).items()
    }
    settings = sphinx.setdefault("config", {})
    settings.update(
        {
            "language": LANGUAGE,
            "locale_dirs": [LOCALES],
            "gettext_compact": False,
            # Sphinx's Chinese search splits words with jieba; bilingual.py gives it the
            # glossary's Chinese terms as its user dictionary (html_search_options).
            "html_search_language": "zh",
            # myst-nb's toggle of a hidden cell ("Show code cell source"); the book hides
            # a cell's input (hide-input) or the whole cell (hide-cell)
            "nb_code_prompt_show": "显示代码",
            "nb_code_prompt_hide": "隐藏代码",
        }
    )
    # The 404 page is the site's, served from its root: one copy, the English edition's.
    settings.pop("html_extra_path", None)
    # The Colab buttons open the Chinese notebooks (book/tools/zh_notebooks.py) from the
    # repository: the theme builds their path from path_to_book.
    config.setdefault("repository", {})["path_to_book"] = NOTEBOOKS.relative_to(ROOT).as_posix()
    return config


def toc_files(toc: dict) -> list[str]:
    """The pages of a Jupyter Book table of contents, root first."""
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", []) if "file" in c]
    return files


def gettext_toc() -> dict:
    """_toc.yml restricted to the Chinese edition's pages, with the English captions: what
    the catalogs are extracted from (the root page's messages include its part captions)."""
    english = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    wanted = set(toc_files(yaml.safe_load((ROOT / "_toc.zh.yml").read_text(encoding="utf-8"))))
    parts = []
    for part in english.get("parts", []):
        chapters = [c for c in part.get("chapters", []) if c.get("file") in wanted]
        if chapters:
            parts.append({**part, "chapters": chapters})
    return {**english, "parts": parts}


def extract() -> Path:
    """Run Sphinx's gettext builder over the Chinese edition's pages; the .pot folder."""
    shutil.rmtree(GETTEXT, ignore_errors=True)
    GETTEXT.mkdir(parents=True)
    toc = GETTEXT / "_toc.yml"
    toc.write_text(yaml.safe_dump(gettext_toc(), allow_unicode=True), encoding="utf-8")
    # the English configuration, one catalog per page (not one per folder)
    english = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config = zh_config(english)
    config["title"] = english["title"]
    settings = config["sphinx"]["config"]
    for key in ("language", "html_search_language"):
        settings.pop(key)
    settings["gettext_location"] = False  # no source line numbers: smaller diffs
    # MyST-NB renders a cell's outputs by the builder's MIME priorities, and the gettext
    # builder has none: its figures (image/png) would be left out, and with them their alt
    # text, which the HTML build translates (Sphinx's Locale transform) like a paragraph.
    settings["nb_mime_priority_overrides"] = [["gettext", "image/png", 10]]
    config_path = GETTEXT / "_config.yml"
    config_path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    command = [
        str(Path(sys.executable).parent / "jupyter-book"),
        "build",
        str(ROOT),
        "--config",
        str(config_path),
        "--toc",
        str(toc),
        "--path-output",
        str(GETTEXT),
        "--builder",
        "custom",
        "--custom-builder",
        "gettext",
        "--quiet",
    ]
    subprocess.run(command, check=True, cwd=ROOT)
    return GETTEXT / "_build" / "gettext"


def update_catalogs(pots: Path, catalogs: Path = CATALOGS) -> list[str]:
    """Create or update ``catalogs/<page>.po`` from each ``pots/<page>.pot``; one line a page."""
    from babel.messages.pofile import read_po, write_po

    toc = yaml.safe_load((ROOT / "_toc.zh.yml").read_text(encoding="utf-8"))
    pages = {str(Path(p).with_suffix("")) for p in toc_files(toc)}
    lines = []
    for pot_path in sorted(pots.rglob("*.pot")):
        page = pot_path.relative_to(pots).with_suffix("")
        if str(page) not in pages:  # sphinx.pot: the templates' strings, Sphinx's own catalog
            continue
        with pot_path.open("rb") as f:
            template = read_po(f)
        po_path = catalogs / page.with_suffix(".po")
        if po_path.is_file():
            with po_path.open("rb") as f:
                catalog = read_po(f, locale=LANGUAGE)
            before, created = _messages(catalog), catalog.creation_date
            catalog.update(template, update_header_comment=False)
            if _messages(catalog) == before:  # nothing changed: no new date in the diff
                catalog.creation_date = created
        else:
            catalog = template
            catalog.locale = LANGUAGE
        catalog.project = "Attention Mechanisms"
        catalog.fuzzy = False
        po_path.parent.mkdir(parents=True, exist_ok=True)
        with po_path.open("wb") as f:
            write_po(f, catalog, width=0, omit_header=False, include_previous=True)
        counts = count(po_path)
        lines.append(f"{page}: {format_counts(counts)}")
    return lines


def _messages(catalog) -> list[tuple]:
    return [(m.id, m.string, sorted(m.flags)) for m in catalog if m.id] + [
        (m.id, m.string) for m in catalog.obsolete.values()
    ]


def count(po_path: Path) -> dict[str, int]:
    """A catalog's translated, fuzzy and untranslated messages (obsolete ones left out)."""
    from babel.messages.pofile import read_po

    with po_path.open("rb") as f:
        catalog = read_po(f)
    counts = {"translated": 0, "fuzzy": 0, "untranslated": 0}
    for message in catalog:
        if not message.id:
            continue
        if message.fuzzy:
            counts["fuzzy"] += 1
        elif message.string:
            counts["translated"] += 1
        else:
            counts["untranslated"] += 1
    return counts


def format_counts(counts: dict[str, int]) -> str:
    return (
        f"{counts['translated']} translated, {counts['fuzzy']} fuzzy, "
        f"{counts['untranslated']} untranslated"
    )


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "config":
        english = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
        out = Path(argv[1])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            "# Written by book/tools/zh.py from _config.yml: do not edit.\n"
            + yaml.safe_dump(zh_config(english), allow_unicode=True, sort_keys=False),
            encoding="utf-8",
        )
        return 0
    if argv == ["catalogs"]:
        for line in update_catalogs(extract()):
            print(line)
        argv = ["notebooks"]
    if argv == ["notebooks"]:
        import zh_notebooks

        for line in zh_notebooks.write_all():
            print(line)
        return 0
    if len(argv) == 2 and argv[0] == "status":
        status = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        behind = 0
        print("Chinese edition (zh/), messages per page:")
        figures = [page for page, counts in status.items() if counts.get("figures_behind")]
        for page, counts in status.items():
            late = counts["fuzzy"] + counts["untranslated"]
            behind += late > 0
            mark = "  <- behind the English" if late else ""
            mark += "  <- figures in English" if page in figures else ""
            print(f"  {page}: {format_counts(counts)}{mark}")
        if behind:
            print(f"  {behind} page(s) behind the English: run `make catalogs` and translate")
        if figures:
            print(
                f"  {len(figures)} page(s) with English figures: their Chinese notebook's "
                "code is not the English code; run `make execute`"
            )
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
