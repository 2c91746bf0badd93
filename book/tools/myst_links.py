"""Plain Markdown links for the book's cross-references, in every notebook's Markdown cells.

The notebooks are read in JupyterLab, Colab, VS Code, GitHub's viewer and nbviewer, which
render Markdown but not MyST roles. So the Markdown cells carry plain links, written relative
to the notebook's own folder (these are the forms from ``chapters/``; from ``book/intro.ipynb``
the paths are ``glossary.md#...``, ``references.bib#...``, ``notation.md``):

    glossary term   [queries](../book/glossary.md#term-query)
    citation, text  [Vaswani et al. [2017]](../book/references.bib#vaswani2017)
    citation, paren [[Vaswani et al., 2017]](../book/references.bib#vaswani2017)
    page            [Notation](../book/notation.md)
    contents        <!-- tableofcontents --> a list of links from _toc.yml <!-- /tableofcontents -->

A glossary fragment is Sphinx's id of the term (``term-`` + the term made an id), so it is also
the term's anchor on the built glossary page. A citation's text is the one the book renders for
``{cite:t}`` or ``{cite:p}`` (a text in brackets means ``{cite:p}``) and its fragment is the
BibTeX key; a role with several keys becomes one link per key. Citations point at
references.bib, not at bibliography.md: outside the book that page is an empty directive, while
the .bib file shows the entry. At build time ``book/_ext/plain_links.py`` turns the links back into the MyST roles
``{term}``, ``{cite:t}``, ``{cite:p}``, ``{doc}`` and the contents list into the
``{tableofcontents}`` directive, so the site is what the roles give.

    python book/tools/myst_links.py            # rewrite roles as links, refresh texts and lists
    python book/tools/myst_links.py --check    # exit 1 if a role is left or a file would change
    python book/tools/myst_links.py FILE ...   # only these notebooks

Writing a role (``{term}`queries <query>```, ``{cite:p}`vaswani2017```) and running this
script is the easy way to add a link: it checks the term or key and writes the link.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = "book/glossary.md"
BIBFILE = "book/references.bib"
TOC_OPEN = "<!-- tableofcontents -->"
TOC_CLOSE = "<!-- /tableofcontents -->"
TOC_NOTE = (
    "<!-- The book shows its table of contents here; this list is written from _toc.yml "
    "by book/tools/myst_links.py. -->"
)
CITE_KINDS = ("t", "p")


class LinkError(ValueError):
    """A role or link that names no glossary term, BibTeX key or page."""


def notebooks(root: Path = ROOT) -> list[Path]:
    """Every notebook of the book: the chapters and the landing page."""
    return sorted((root / "chapters").glob("*.ipynb")) + [root / "book" / "intro.ipynb"]


# --- what the links point at -------------------------------------------------------------


def term_id(term: str) -> str:
    """Sphinx's HTML id for a glossary term (sphinx.domains.std.make_glossary_term)."""
    from sphinx.util.nodes import _make_id

    return _make_id("term-" + term)


def _stamp(path: Path) -> tuple[Path, int]:
    """A cache key that changes when the file does."""
    return path, path.stat().st_mtime_ns


@cache
def _glossary(path: Path, mtime: int) -> tuple[tuple[str, str], ...]:
    terms = []
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"^(?:```|:::)\{glossary\}[^\n]*\n(.*?)^(?:```|:::)", text, re.M | re.S)
    for block in blocks:
        for line in block.splitlines():
            if line.strip() and not line.startswith((" ", "\t", ":")):
                terms.append((term_id(line.strip()), line.strip()))
    return tuple(terms)


def glossary_terms(root: Path = ROOT) -> dict[str, str]:
    """Map each glossary term's id (the link fragment) to the term."""
    terms: dict[str, str] = {}
    for ident, term in _glossary(*_stamp(root / GLOSSARY)):
        if ident in terms or ident == "term":
            # Sphinx would fall back to a numbered id (term-0), which no link could name.
            raise LinkError(
                f"{GLOSSARY}: glossary terms {terms.get(ident)!r} and {term!r} "
                f"have the same id {ident!r}; rename one"
            )
        terms[ident] = term
    return terms


@cache
def _bibliography(path: Path, mtime: int):
    import pybtex.database

    return pybtex.database.parse_file(str(path))


def bib_keys(root: Path = ROOT) -> set[str]:
    return set(_bibliography(*_stamp(root / BIBFILE)).entries.keys())


@cache
def _citation_texts(path: Path, mtime: int) -> dict[tuple[str, str], str]:
    """(key, kind) -> the text sphinxcontrib-bibtex renders with this book's settings
    (bibtex_reference_style author_year, bibtex_default_style plain)."""
    import types

    import pybtex_docutils
    from pybtex.plugin import find_plugin as pybtex_plugin
    from sphinxcontrib.bibtex.plugin import find_plugin
    from sphinxcontrib.bibtex.style.referencing import format_references
    from sphinxcontrib.bibtex.style.template import SphinxReferenceInfo

    style = find_plugin("sphinxcontrib.bibtex.style.referencing", "author_year")()
    data = _bibliography(path, mtime)
    formatted = pybtex_plugin("pybtex.style.formatting", "plain")().format_entries(
        data.entries.values()
    )
    backend = pybtex_docutils.Backend()
    # With a builder other than html or latex, the reference renders as plain nodes.
    info = SphinxReferenceInfo(types.SimpleNamespace(name="rinoh"), "", "", "", None, "", "")
    texts = {}
    for entry in formatted:
        source = data.entries[entry.key]
        for kind in CITE_KINDS:
            rich = format_references(style, kind, [(source, entry, info)])
            texts[entry.key, kind] = "".join(node.astext() for node in rich.render(backend))
    return texts


def citation_text(key: str, kind: str, root: Path = ROOT) -> str:
    """'Vaswani et al. [2017]' (kind 't') or '[Vaswani et al., 2017]' (kind 'p')."""
    try:
        return _citation_texts(*_stamp(root / BIBFILE))[key, kind]
    except KeyError:
        raise LinkError(f"no BibTeX key {key!r} in {BIBFILE}") from None


def citation_kind(text: str) -> str:
    """A citation link's text in brackets is a parenthetical citation ({cite:p})."""
    return "p" if text.startswith("[") and text.endswith("]") else "t"


def _title(path: Path) -> str:
    return _cached_title(*_stamp(path))


@cache
def _cached_title(path: Path, mtime: int) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    match = re.search(r"^#\s+(.+?)\s*#*\s*$", text, re.M)
    if not match:
        raise LinkError(f"{path}: no '# Title' heading")
    return match.group(1)


def document_file(docname: str, root: Path = ROOT) -> Path | None:
    """The source file of a document name such as 'book/notation', if there is one."""
    for suffix in (".md", ".ipynb"):
        if (root / (docname + suffix)).is_file():
            return root / (docname + suffix)
    return None


def document_title(docname: str, root: Path = ROOT) -> str:
    path = document_file(docname, root)
    if path is None:
        raise LinkError(f"no page {docname!r} (neither {docname}.md nor {docname}.ipynb)")
    return _title(path)


# --- Markdown text -----------------------------------------------------------------------

_FENCE = r"(?P<fence>^[ \t]*(?P<fchar>```+|~~~+)[^\n]*\n(?:.*?\n)??[ \t]*(?P=fchar)[ \t]*$)"
_CODE = r"(?P<code>(?P<ticks>`+)(?!`)(?:(?!\n[ \t]*\n).)*?(?<!`)(?P=ticks)(?!`))"
_ROLE = r"(?P<role>\{(?P<name>term|cite:t|cite:p|doc)\}`(?P<content>[^`]+)`)"
_DIRECTIVE = (
    r"(?P<directive>^[ \t]*(?:```+|:::+)\{(?P<dname>[^}\n]+)\}[^\n]*\n"
    r"(?:[ \t]*(?:```+|:::+)[ \t]*$)?)"
)
_LINK = (
    r"(?P<link>(?<![!\\])\[(?P<text>(?:\\.|[^\[\]\\]|\[(?:\\.|[^\[\]\\])*\])*)\]"
    r"\((?P<url>[^()\s]+)\))"
)
_TOC = rf"(?P<toc>^{re.escape(TOC_OPEN)}[ \t]*\n.*?^{re.escape(TOC_CLOSE)}[ \t]*$)"

ROLES_PATTERN = re.compile("|".join([_DIRECTIVE, _FENCE, _ROLE, _CODE]), re.M | re.S)
LINKS_PATTERN = re.compile("|".join([_TOC, _FENCE, _CODE, _LINK]), re.M | re.S)
_ESCAPE = re.compile(r"([\\`*_\[\]<>])")
_UNESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def escape(text: str) -> str:
    return _ESCAPE.sub(r"\\\1", text)


def unescape(text: str) -> str:
    return _UNESCAPE.sub(r"\1", text)


def _rel(target: str, docdir: str) -> str:
    """The path of a project file (e.g. 'book/glossary.md') relative to a notebook's folder."""
    return posixpath.relpath(target, docdir or ".")


def resolve(url: str, docdir: str) -> tuple[str, str]:
    """A relative link's target as (project path, fragment); ('', '') for other links."""
    if re.match(r"^[a-zA-Z][\w+.-]*:|^/|^#", url):
        return "", ""
    path, _, fragment = url.partition("#")
    return posixpath.normpath(posixpath.join(docdir or ".", path)), fragment


MYST_PATTERN = re.compile(
    "|".join(
        [
            r"(?P<directive>^[ \t]*(?:```+|:::+)\{[^}\n]*\}[^\n]*)",
            _FENCE,
            r"(?P<role>\{[a-z][\w:.+-]*\}`[^`\n]*`?)",
            _CODE,
        ]
    ),
    re.M | re.S,
)


def myst_syntax(text: str) -> list[str]:
    """The MyST roles and directives of a Markdown text (code spans and plain fences apart)."""
    return [
        m.group(0).strip()
        for m in MYST_PATTERN.finditer(text)
        if m.group("directive") or m.group("role")
    ]


def toc_markdown(docdir: str, root: Path = ROOT) -> str:
    """The book's table of contents (_toc.yml) as a Markdown list, between its markers."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    lines = [TOC_OPEN, TOC_NOTE, ""]

    def entries(items, depth):
        for entry in items:
            if "file" not in entry:
                continue  # a URL or glob entry: the book shows those, this list does not
            docname = re.sub(r"\.(md|ipynb)$", "", entry["file"])
            path = document_file(docname, root)
            if path is None:
                raise LinkError(f"_toc.yml: no file for {entry['file']!r}")
            title = entry.get("title") or _title(path)
            link = _rel(path.relative_to(root).as_posix(), docdir)
            lines.append(f"{'  ' * depth}- [{title}]({link})")
            entries(entry.get("sections", []), depth + 1)

    for part in toc.get("parts") or [{"chapters": toc.get("chapters", [])}]:
        if part.get("caption"):
            lines += [f"**{part['caption']}**", ""]
        entries(part.get("chapters", []), 0)
        lines.append("")
    lines.append(TOC_CLOSE)
    return "\n".join(lines)


def to_links(text: str, docdir: str, root: Path = ROOT) -> str:
    """Rewrite the MyST roles of one Markdown text as plain links (and refresh them)."""
    terms = glossary_terms(root)
    by_name = {term.lower(): ident for ident, term in terms.items()}

    def role(match: re.Match) -> str:
        if match.group("directive") is not None:
            if match.group("dname").strip() == "tableofcontents":
                return toc_markdown(docdir, root)
            return match.group(0)
        if match.group("role") is None:
            return match.group(0)
        name, content = match.group("name"), match.group("content")
        explicit = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", content)
        label, target = (explicit.group(1), explicit.group(2)) if explicit else (content, content)
        if name == "term":
            ident = by_name.get(target.strip().lower())
            if ident is None:
                raise LinkError(f"{{term}}`{content}`: no term {target!r} in {GLOSSARY}")
            return f"[{escape(label)}]({_rel(GLOSSARY, docdir)}#{ident})"
        if name == "doc":
            docname = (
                posixpath.normpath(posixpath.join(docdir, target))
                if not target.startswith("/")
                else target.lstrip("/")
            )
            path = document_file(docname, root)
            if path is None:
                raise LinkError(f"{{doc}}`{content}`: no page {docname!r}")
            # the page's title is Markdown already (a heading); an explicit label is literal
            label = escape(label) if explicit else document_title(docname, root)
            return f"[{label}]({_rel(path.relative_to(root).as_posix(), docdir)})"
        kind = name.split(":")[1]
        links = []
        for key in (k.strip() for k in content.split(",")):
            if not re.fullmatch(r"[^\s{}#()\[\]]+", key):
                raise LinkError(f"{{{name}}}`{content}`: only plain keys can be written as links")
            links.append(f"[{citation_text(key, kind, root)}]({_rel(BIBFILE, docdir)}#{key})")
        return ", ".join(links)

    text = ROLES_PATTERN.sub(role, text)
    return refresh_links(text, docdir, root)


def refresh_links(text: str, docdir: str, root: Path = ROOT) -> str:
    """Check every glossary and citation link, rewrite citation texts and the contents list
    as the book renders them today."""
    terms, keys = glossary_terms(root), bib_keys(root)

    def link(match: re.Match) -> str:
        if match.group("toc") is not None:
            return toc_markdown(docdir, root)
        if match.group("link") is None:
            return match.group(0)
        path, fragment = resolve(match.group("url"), docdir)
        if path == GLOSSARY and fragment and fragment not in terms:
            raise LinkError(f"{match.group(0)}: no glossary term with the id {fragment!r}")
        if path == BIBFILE:
            if fragment not in keys:
                raise LinkError(f"{match.group(0)}: no BibTeX key {fragment!r} in {BIBFILE}")
            kind = citation_kind(unescape(match.group("text")))
            return f"[{citation_text(fragment, kind, root)}]({match.group('url')})"
        return match.group(0)

    return LINKS_PATTERN.sub(link, text)


def to_roles(text: str, docdir: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """Rewrite the plain links of one Markdown text as MyST roles (what the book builds from).

    Returns the text and a list of problems (links to an unknown term, key or page)."""
    terms, keys = glossary_terms(root), bib_keys(root)
    problems: list[str] = []

    def link(match: re.Match) -> str:
        if match.group("toc") is not None:
            return "```{tableofcontents}\n```"
        if match.group("link") is None:
            return match.group(0)
        label = unescape(match.group("text"))
        path, fragment = resolve(match.group("url"), docdir)
        if path == GLOSSARY and fragment:
            term = terms.get(fragment)
            if term is None:
                problems.append(
                    f"{match.group(0)}: no glossary term with the id {fragment!r} in {GLOSSARY}"
                )
                return match.group(0)
            return f"{{term}}`{label}`" if label == term else f"{{term}}`{label} <{term}>`"
        if path == BIBFILE:
            if fragment not in keys:
                problems.append(f"{match.group(0)}: no BibTeX key {fragment!r} in {BIBFILE}")
                return match.group(0)
            return f"{{cite:{citation_kind(label)}}}`{fragment}`"
        if path and not fragment and path.endswith((".md", ".ipynb")):
            docname = path.rsplit(".", 1)[0]
            if document_file(docname, root) is not None:
                target = posixpath.relpath(docname, docdir or ".")
                if label == document_title(docname, root):
                    return f"{{doc}}`{target}`"
                if not re.search(r"[*_`$\\<]", match.group("text")):  # a role's text is literal
                    return f"{{doc}}`{label} <{target}>`"
        return match.group(0)

    return LINKS_PATTERN.sub(link, text), problems


# --- notebooks ---------------------------------------------------------------------------


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _docdir(path: Path, root: Path) -> str:
    return path.resolve().parent.relative_to(root.resolve()).as_posix()


def dump(nb: dict) -> str:
    """A notebook as nbformat writes it."""
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def convert(path: Path, root: Path = ROOT) -> tuple[str, str]:
    """(old, new) text of a notebook with its Markdown cells' roles written as links."""
    old = path.read_text(encoding="utf-8")
    nb = json.loads(old)
    docdir = _docdir(path, root)
    changed = False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = _source(cell)
        new = to_links(source, docdir, root)
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
            changed = True
    return old, dump(nb) if changed else old


def _syntax(notebook: str) -> list[str]:
    return [
        found
        for c in json.loads(notebook)["cells"]
        if c["cell_type"] == "markdown"
        for found in myst_syntax(_source(c))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="notebooks (default: all)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if a role is left or a file would change",
    )
    args = parser.parse_args(argv)
    failed = False
    for path in args.files or notebooks():
        name = path.resolve().relative_to(ROOT).as_posix()
        try:
            old, new = convert(path)
        except LinkError as error:
            print(f"{name}: {error}", file=sys.stderr)
            failed = True
            continue
        if args.check:
            left = _syntax(old)
            if left:
                print(
                    f"{name}: MyST syntax in Markdown cells ({', '.join(left[:5])}): "
                    "run python book/tools/myst_links.py",
                    file=sys.stderr,
                )
            elif new != old:
                print(
                    f"{name}: stale citation texts or contents list: "
                    "run python book/tools/myst_links.py",
                    file=sys.stderr,
                )
            failed |= bool(left) or new != old
            continue
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"{name}: rewrote its Markdown links")
        left = _syntax(new)
        if left:
            print(
                f"{name}: MyST syntax with no plain form, rewrite it by hand: "
                f"{', '.join(left[:5])}",
                file=sys.stderr,
            )
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
