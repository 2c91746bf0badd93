"""The bootstrap cell every chapter starts with, and a checker/fixer for it.

The repository URL lives in one place, ``_config.yml`` (``repository.url``); every chapter's
first cell must be exactly ``cell_source(url)``.

    python3 book/tools/bootstrap.py              # check every bootstrap cell
    python3 book/tools/bootstrap.py --fix        # rewrite them from _config.yml
    python3 book/tools/bootstrap.py --set-url https://github.com/OWNER/REPO   # make set-repo

The cell installs the helpers from ``HELPERS_SOURCE`` when it is set (a folder, a wheel or a
pip URL), else from the clone of the repository the notebook sits in (``pip install -e``), else
from ``git+BOOK_REPOSITORY``. When pip fails it says why in one message: no network, no
repository at the URL, or a version conflict with a preinstalled package.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What platforms preinstall and the bootstrap cell pins so that pip never replaces it: Colab
# imports ipywidgets 7.7 when its kernel starts, and a new torch or numpy under a running
# kernel breaks later imports. (Anything else pip would replace is reported as a restart.)
KEEP = (
    "torch",
    "numpy",
    "matplotlib",
    "pillow",
    "ipywidgets",
    "widgetsnbextension",
    "jupyterlab-widgets",
    "ipykernel",
    "ipython",
    "traitlets",
    "tqdm",
)

TEMPLATE = """\
# Run anywhere: on Colab or in a bare Jupyter, install the book's helpers package first.
BOOK_REPOSITORY = "@URL@"
try:
    import helpers  # noqa: F401  (present in the book's own environment)
except ModuleNotFoundError:
    import importlib, importlib.metadata as md, json, os, pathlib, re, subprocess, sys, tempfile, time
    before = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version
              for d in md.distributions()}
    # Pin what the platform preinstalled (Colab: ipywidgets 7.7, torch, ...): pip adds
    # the helpers beside it and never replaces it.
    keep = @KEEP@
    # From HELPERS_SOURCE if set (a folder, a wheel or a pip URL), else from the clone of the
    # repository this notebook is in (editable; a Chinese notebook is 4 folders down), else
    # from the repository.
    here = pathlib.Path.cwd().resolve()
    clone = next((str(p) for p in (here, *here.parents[:4])
                  if (p / "src" / "helpers" / "__init__.py").is_file()), None)
    source = os.environ.get("HELPERS_SOURCE") or clone or "git+" + BOOK_REPOSITORY
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pins, report = os.path.join(tmp, "keep.txt"), os.path.join(tmp, "report.json")
        pinned = [f"{n}=={before[n]}" for n in keep if n in before]
        with open(pins, "w") as f:
            f.write("\\n".join(pinned))
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--constraint",
                              pins, "--report", report, *(["-e"] if source == clone else []),
                              source], capture_output=True, text=True)
        if pip.returncode != 0:
            err, url = pip.stderr, source.removeprefix("git+")
            why, fix = "pip failed", "read pip's message below"
            if re.search(r"resolve host|NameResolution|Failed to establish|unreachable", err):
                why = f"no network: pip could not reach {url if url != source else 'an index'}"
                fix = "connect to the internet"
            elif re.search(r"(?i)repository .*not found|could not read Username", err):
                why, fix = f"no public repository at {url}", "check the book's repository URL"
            elif re.search(r"ResolutionImpossible|conflicting dependencies", err):
                named = [p for p in pinned if p in err] or pinned
                why = f"a version conflict with what is preinstalled here ({', '.join(named)})"
                fix = "run the book in a fresh environment (python -m venv)"
            said = [line.strip() for line in err.splitlines()
                    if line.strip().startswith(("ERROR", "fatal"))] or [err.strip() or "nothing"]
            raise SystemExit(f"Could not install the book's helpers: {why}.\\nTo do: {fix}, or "
                             "set os.environ['HELPERS_SOURCE'] to a clone or wheel of the book's "
                             f"repository and run this cell again.\\npip said: {said[0][-300:]}")
        with open(report) as f:
            new = {i["metadata"]["name"]: i["metadata"]["version"]
                   for i in json.load(f)["install"]}
    print(f"Installed {', '.join(f'{n} {v}' for n, v in new.items())} "
          f"in {time.perf_counter() - started:.0f} s.")
    loaded = {d.lower().replace("_", "-") for module, dists in md.packages_distributions().items()
              if module in sys.modules and not module.startswith("_") for d in dists}
    stale = [n for n in new if n.lower().replace("_", "-") in before.keys() & loaded]
    if stale:  # an old version is already imported: only a restart loads the new one
        raise SystemExit(f"pip replaced {', '.join(stale)}, already imported here: restart "
                         "the kernel (Colab: Runtime > Restart session), then run all cells.")
    importlib.invalidate_caches()
    import helpers  # noqa: F401"""


def repository_url(config: Path = ROOT / "_config.yml") -> str:
    """Read ``repository.url`` from ``_config.yml`` (no YAML library needed)."""
    in_repository = False
    for line in config.read_text(encoding="utf-8").splitlines():
        if not line.startswith((" ", "\t")):
            in_repository = line.strip().startswith("repository:")
            continue
        key, _, value = line.strip().partition(":")
        if in_repository and key == "url":
            return value.strip().strip("\"'")
    raise ValueError(f"{config} has no repository.url")


def cell_source(url: str | None = None) -> str:
    """The bootstrap cell's source for ``url`` (default: ``repository.url`` in _config.yml)."""
    names = [f'"{name}"' for name in KEEP]
    keep = f"({', '.join(names[:6])},\n            {', '.join(names[6:])})"
    return TEMPLATE.replace("@URL@", url or repository_url()).replace("@KEEP@", keep)


def chapters(root: Path = ROOT) -> list[Path]:
    """Every notebook that starts with the bootstrap cell: the chapters and the landing page."""
    return [*sorted((root / "chapters").glob("*.ipynb")), root / "book" / "intro.ipynb"]


def check_cells(root: Path = ROOT, *, fix: bool = False) -> list[str]:
    """Names of the notebooks whose first cell is not ``cell_source()``; rewrite them if ``fix``."""
    want = cell_source(repository_url(root / "_config.yml"))
    bad = []
    for path in chapters(root):
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid notebook JSON: {error}") from None
        first = nb["cells"][0]
        source = "".join(first["source"]) if isinstance(first["source"], list) else first["source"]
        if first["cell_type"] == "code" and source == want:
            continue
        bad.append(path.name)
        if fix and first["cell_type"] == "code" and "BOOK_REPOSITORY" in source:
            first["source"] = want.splitlines(keepends=True)  # nbformat's list of lines
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return bad


GITHUB_URL = re.compile(
    r"https://github\.com/[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}"
)


def set_repository(url: str, root: Path = ROOT) -> list[str]:
    """Point the book at ``url``: ``_config.yml``, ``CITATION.cff`` and every bootstrap cell.

    Returns the files changed. Raises ``ValueError`` for anything but
    ``https://github.com/OWNER/REPO`` (the launch buttons and the cell need that form).
    """
    url = url.strip().removesuffix("/").removesuffix(".git")
    if not GITHUB_URL.fullmatch(url) or url.rsplit("/", 1)[-1] in {".", ".."}:
        raise ValueError(f"URL must look like https://github.com/OWNER/REPO, got {url!r}")
    config = root / "_config.yml"
    old_url = repository_url(config)
    lines = config.read_text(encoding="utf-8").splitlines(keepends=True)
    in_repository, done = False, False
    for i, line in enumerate(lines):
        if not line.startswith((" ", "\t")):
            in_repository = line.startswith("repository:")
        elif in_repository and line.strip().startswith("url:"):
            indent = line[: len(line) - len(line.lstrip())]
            lines[i], done = f"{indent}url: {url}\n", True
    if not done:
        raise ValueError(f"{config} has no repository.url to rewrite")
    config.write_text("".join(lines), encoding="utf-8")
    changed = [str(config.relative_to(root))]
    citation = root / "CITATION.cff"
    if citation.exists():
        text = re.sub(
            r"(?m)^repository-code: .*$",
            f'repository-code: "{url}"',
            citation.read_text(encoding="utf-8"),
        )
        citation.write_text(text, encoding="utf-8")
        changed.append(citation.name)
    readme = root / "README.md"
    if readme.exists() and old_url != url:
        text = readme.read_text(encoding="utf-8")
        new = _relink(text, old_url, url)
        if new != text:
            readme.write_text(new, encoding="utf-8")
            changed.append(readme.name)
    fixed = check_cells(root, fix=True)
    return changed + [f"{name} (bootstrap cell)" for name in fixed]


def site_url(url: str) -> str:
    """The GitHub Pages address of the repository ``url`` (https://github.com/OWNER/REPO)."""
    owner, repo = url.removeprefix("https://github.com/").split("/")
    return f"https://{owner.lower()}.github.io/{repo}/"


def _relink(text: str, old: str, new: str) -> str:
    """``text`` with the repository, Colab and site links of ``old`` pointing at ``new``."""
    old_path, new_path = (
        old.removeprefix("https://github.com/"),
        new.removeprefix("https://github.com/"),
    )
    text = text.replace(site_url(old), site_url(new))
    text = text.replace(
        f"colab.research.google.com/github/{old_path}/",
        f"colab.research.google.com/github/{new_path}/",
    )
    return re.sub(re.escape(old) + r"(?=[/)\s>\]]|$)", new, text)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--set-url"] and len(argv) == 2:
        try:
            changed = set_repository(argv[1])
        except ValueError as err:
            print(f"error: {err}")
            return 2
        print(f"Repository set to {repository_url()} in: {', '.join(changed)}.")
        print("Now rebuild (make book) and commit; the chapters need no re-execution.")
        return 0
    fix = "--fix" in argv
    try:
        bad = check_cells(fix=fix)
    except ValueError as err:
        print(f"error: {err}")
        return 2
    for name in bad:
        print(f"{name}: first cell is not the bootstrap cell{' (fixed)' if fix else ''}")
    return 1 if bad and not fix else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
