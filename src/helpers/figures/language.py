"""The language of the text in the book's figures: English, or Chinese in the 中文版.

The chapters write their figure text in English. Once ``helpers.figures`` is imported, every
text matplotlib is given (titles, axis labels, legends, annotations, tick labels), and every
slider label and frame description of a live figure, passes through :func:`translate`. While
the environment variable ``BOOK_LANG`` is ``zh_CN`` (a Chinese notebook sets it in its first
cell) each is looked up in the catalog ``zh_CN.po`` beside this module and drawn in a CJK font:

    >>> translate("attention weights")                    # doctest: +SKIP
    '注意力权重'

A catalog entry may hold ``{}`` for a part that varies, such as a number or a name:
``msgid "query {} (source: key {})"`` / ``msgstr "查询 {}（来源：键 {}）"``. The parts are
filled in the same order, and a part that is itself an entry is translated as well. Maths
between ``$`` signs is kept as it is. A text the catalog lacks is drawn in English and
noted in :data:`untranslated`, so a build can refuse a figure the catalog does not cover
(``book/tools/execute.py``).

Without a CJK font (Colab has none), the figures keep their English text, and a warning
says so once: without the font the Chinese would show as boxes.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from functools import cache
from pathlib import Path

__all__ = ["VARIABLE", "active", "current", "install", "phrase", "translate", "untranslated"]

VARIABLE = "BOOK_LANG"
#: Fonts with simplified Chinese, the first one installed is used. Debian's fonts-noto-cjk
#: holds every Noto Sans CJK face in one collection, which matplotlib names by its first face
#: (JP); its simplified characters are the SC face's.
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Noto Sans CJK JP",
    "WenQuanYi Zen Hei",
    "Microsoft YaHei",
    "PingFang SC",
    "SimHei",
)
#: How the files of such fonts are named, to find one installed after matplotlib's font cache
#: was written (matplotlib rereads the system's fonts only when its version changes).
CJK_FILES = re.compile(r"(?i)cjk|sourcehan|wqy|msyh|pingfang|simhei|notosanssc")
#: Where the texts the catalog lacks are also written, one JSON string per line, when this
#: variable names a file (book/tools/execute.py sets it).
LOG_VARIABLE = "BOOK_UNTRANSLATED_LOG"
MATH = re.compile(r"\$[^$]*\$")
WORDS = re.compile(r"[A-Za-z]{2,}")

#: The texts met since :func:`install` that hold English words and had no catalog entry.
untranslated: set[str] = set()


def current() -> str:
    """The figures' language from ``BOOK_LANG``: ``"zh_CN"`` for any ``zh…``, else ``"en"``."""
    return "zh_CN" if os.environ.get(VARIABLE, "").lower().startswith("zh") else "en"


def parse_po(text: str) -> dict[str, str]:
    """msgid -> msgstr of a gettext catalog, leaving out the header, untranslated and fuzzy
    entries; an entry with a ``msgctxt`` is keyed ``context + "\\x04" + msgid``, as gettext
    keys it. Enough of the format for this module's catalog (no plurals)."""
    entries, entry, field, fuzzy = {}, {}, None, False

    def flush():
        nonlocal entry, field, fuzzy
        if entry.get("msgid") and entry.get("msgstr") and not fuzzy:
            key = entry["msgid"]
            entries[f"{entry['msgctxt']}\x04{key}" if "msgctxt" in entry else key] = entry["msgstr"]
        entry, field, fuzzy = {}, None, False

    for line in text.splitlines():
        line = line.strip()
        if not line:
            flush()
        elif line.startswith("#,") and "fuzzy" in line:
            fuzzy = True
        elif line.startswith(("msgctxt ", "msgid ", "msgstr ")):
            keyword, _, value = line.partition(" ")
            if keyword != "msgstr" and "msgstr" in entry:  # the next entry, with no blank line
                flush()
            field = keyword
            entry[field] = _unquote(value)
        elif line.startswith('"') and field:
            entry[field] += _unquote(line)
    flush()
    return entries


def _unquote(value: str) -> str:
    body = value.strip()[1:-1]
    return re.sub(r'\\(["\\nt])', lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), body)


@cache
def catalog(language: str) -> tuple[dict[str, str], list[tuple[re.Pattern, str]]]:
    """The catalog of ``language``: exact entries, and the entries with ``{}`` as patterns,
    the one with the most fixed text first (``"head {}: {} test sequences"`` before
    ``"head {}"``)."""
    path = Path(__file__).with_name(f"{language}.po")
    entries = parse_po(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return entries, patterns_of(entries)


def patterns_of(entries: dict[str, str]) -> list[tuple[re.Pattern, str]]:
    """The entries with ``{}`` (and no context) as (pattern, translation), the most specific
    (the most fixed text) first."""
    templates = [m for m in entries if "{}" in m and "\x04" not in m]
    templates.sort(key=lambda msgid: -len(msgid.replace("{}", "")))
    return [
        (re.compile("(.+?)".join(map(re.escape, msgid.split("{}"))), re.DOTALL), entries[msgid])
        for msgid in templates
    ]


def translate(text: str, language: str | None = None) -> str:
    """``text`` in ``language`` (default: :func:`active`); unchanged in English, or when it
    holds no English words outside maths. A text the catalog lacks is returned unchanged and
    added to :data:`untranslated`."""
    language = language or active()
    if language == "en" or not WORDS.search(MATH.sub("", text)):
        return text
    found = _lookup(text, language)
    if found is not None:
        return found
    if text not in untranslated:
        untranslated.add(text)
        if os.environ.get(LOG_VARIABLE):
            with open(os.environ[LOG_VARIABLE], "a", encoding="utf-8") as log:
                log.write(json.dumps(text, ensure_ascii=False) + "\n")
    return text


def _lookup(text: str, language: str) -> str | None:
    """``text``'s entry, exact or the first pattern that matches it (its parts looked up in
    turn, and kept as they are when the catalog lacks them: a number, a token); None if none."""
    exact, patterns = catalog(language)
    if text in exact:
        return exact[text]
    for pattern, template in patterns:
        match = pattern.fullmatch(text)
        if match:
            parts = [_lookup(part, language) or part for part in match.groups()]
            return _fill(template, parts)
    return None


def phrase(msgid: str, *parts: str) -> str:
    """The helpers' own sentence ``msgid`` in :func:`active`'s language, its ``{}`` filled
    with ``parts`` in order: ``phrase("{} against {}", "weight", "key")``. Its catalog entry
    has the context ``helpers`` (``msgctxt "helpers"``), so no figure text is matched to it."""
    language = active()
    template = msgid if language == "en" else catalog(language)[0].get(f"helpers\x04{msgid}")
    if template is None:
        untranslated.add(msgid)
        template = msgid
    return _fill(template, parts)


def _fill(template: str, parts) -> str:
    """``template`` with its ``{}`` replaced by ``parts``, in order."""
    pieces = template.split("{}")
    return "".join(p + q for p, q in zip(pieces, [*parts, ""]))


def _cjk_font() -> str | None:
    from matplotlib import font_manager

    def installed():
        names = {font.name for font in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in names), None)

    if installed() is None:
        for path in font_manager.findSystemFonts():
            if CJK_FILES.search(Path(path).name):
                font_manager.fontManager.addfont(path)
    return installed()


@cache
def _drawable(language: str) -> bool:
    """Whether matplotlib can draw ``language``. In Chinese, a CJK font found becomes the
    figures' font, ahead of matplotlib's own (DejaVu Sans), which draws the glyphs it lacks.
    It must come first: a text with maths in it is laid out by mathtext, which draws the words
    around the maths in the first font alone, with no fallback. Without a CJK font a warning
    says, once, that the figures stay English."""
    if language == "en":
        return True
    font = _cjk_font()
    if font is None:
        warnings.warn(
            f"no font with Chinese characters is installed (one of {', '.join(CJK_FONTS)}), "
            "so the figures keep their English text. On Colab, Debian or Ubuntu: run "
            "`!apt-get -qq install -y fonts-noto-cjk`, restart the kernel and run again.",
            stacklevel=4,
        )
        return False
    import matplotlib as mpl

    mpl.rcParams["font.family"] = [font, *mpl.rcParams["font.sans-serif"][:1]]
    return True


def active() -> str:
    """The language the figures are drawn in: :func:`current`, or English without a font."""
    language = current()
    return language if _drawable(language) else "en"


@cache
def install() -> None:
    """Pass every text matplotlib is given through :func:`translate` (once per interpreter;
    ``helpers.figures`` does it when imported). Nothing changes while the language is English;
    the language is read at each text, so a notebook may set ``BOOK_LANG`` after the import."""
    from matplotlib import text as mtext

    set_text = mtext.Text.set_text

    def set_translated_text(self, s):
        return set_text(self, translate(s) if isinstance(s, str) else s)

    mtext.Text.set_text = set_translated_text
