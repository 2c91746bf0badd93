"""Sphinx extension: the notebooks' plain Markdown links become MyST roles at build time.

The Markdown cells of the notebooks carry plain links, so that they read cleanly in
JupyterLab, Colab and GitHub's viewer (``book/tools/myst_links.py`` describes the forms and
writes them). Before myst-nb parses a notebook, a ``source-read`` handler rewrites its
Markdown cells back into what the book is built from:

- ``[queries](../book/glossary.md#term-query)``       -> ``{term}`queries <query>```
- ``[Vaswani et al. [2017]](../book/references.bib#vaswani2017)``   -> ``{cite:t}`vaswani2017```
- ``[[Vaswani et al., 2017]](../book/references.bib#vaswani2017)``  -> ``{cite:p}`vaswani2017```
- ``[Notation](notation.md)`` (a page, no fragment)   -> ``{doc}`notation```
- the ``<!-- tableofcontents -->`` list               -> the ``{tableofcontents}`` directive

so the site keeps its glossary links, author-year citations with their bibliography entries,
page links and table of contents exactly as the roles give them. A link to a glossary id or
BibTeX key that does not exist is a build warning (the book builds with -W: an error).
"""

from __future__ import annotations

import importlib.util
import json
import posixpath
import sys
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)
TOOL = Path(__file__).resolve().parents[1] / "tools" / "myst_links.py"


def _tool():
    """book/tools/myst_links.py, the one definition of the link forms."""
    name = "_book_tools_myst_links"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TOOL)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    tool, root = _tool(), Path(app.srcdir)
    # Re-read the notebook when what its links point at changes.
    for dependency in (tool.GLOSSARY, tool.BIBFILE, "_toc.yml"):
        app.env.note_dependency(str(root / dependency))
    try:
        nb = json.loads(source[0])
    except json.JSONDecodeError:
        return  # book/_ext/notebook_checks.py reports it, naming the file
    docdir = posixpath.dirname(docname)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        try:
            new, problems = tool.to_roles(text, docdir, root)
        except tool.LinkError as error:
            new, problems = text, [str(error)]
        for problem in problems:
            logger.warning(
                f"{problem} (python book/tools/myst_links.py --check lists them all)",
                location=docname,
                type="plain_links",
                subtype="unknown_target",
            )
        cell["source"] = new
    source[0] = json.dumps(nb, ensure_ascii=False)


def setup(app: Sphinx) -> dict:
    # Invalid notebook JSON and figures without saved widget state fail the build by name.
    app.setup_extension("notebook_checks")
    app.connect("source-read", _source_read)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
