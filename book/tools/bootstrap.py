"""The bootstrap cell every chapter starts with, and a checker/fixer for it.

The repository URL lives in one place, ``_config.yml`` (``repository.url``); every chapter's
first cell must be exactly ``cell_source(url)``. ``python book/tools/bootstrap.py --fix``
rewrites the cells after the URL changes (then re-run ``make execute``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What platforms preinstall and the bootstrap cell pins so that pip never replaces it: Colab
# imports ipywidgets 7.7 when its kernel starts, and a new torch or numpy under a running
# kernel breaks later imports. (Anything else pip would replace is reported as a restart.)
KEEP = ("torch", "numpy", "matplotlib", "pillow", "ipywidgets", "widgetsnbextension",
        "jupyterlab-widgets", "ipykernel", "ipython", "traitlets", "tqdm")

TEMPLATE = """\
# Run anywhere: on Colab or in a bare Jupyter, install the book's helpers package first.
BOOK_REPOSITORY = "@URL@"
try:
    import helpers  # noqa: F401  (present in the book's own environment)
except ModuleNotFoundError:
    import importlib, importlib.metadata as md, json, os, subprocess, sys, tempfile, time
    before = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version
              for d in md.distributions()}
    # Pin what the platform preinstalled (Colab: ipywidgets 7.7, torch, ...): pip adds
    # the helpers beside it and never replaces it.
    keep = @KEEP@
    source = os.environ.get("HELPERS_SOURCE", "git+" + BOOK_REPOSITORY)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pins, report = os.path.join(tmp, "keep.txt"), os.path.join(tmp, "report.json")
        pinned = [f"{n}=={before[n]}" for n in keep if n in before]
        with open(pins, "w") as f:
            f.write("\\n".join(pinned))
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                              "--constraint", pins, "--report", report, source],
                             capture_output=True, text=True)
        if pip.returncode != 0:
            raise RuntimeError(f"pip could not install the helpers beside {', '.join(pinned)}:"
                               f"\\n{pip.stderr[-2000:]}")
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


def chapters() -> list[Path]:
    """Every notebook that starts with the bootstrap cell: the chapters and the landing page."""
    return [*sorted((ROOT / "chapters").glob("*.ipynb")), ROOT / "book" / "intro.ipynb"]


def main(argv: list[str]) -> int:
    fix = "--fix" in argv
    want = cell_source()
    bad = []
    for path in chapters():
        nb = json.loads(path.read_text(encoding="utf-8"))
        first = nb["cells"][0]
        source = "".join(first["source"]) if isinstance(first["source"], list) else first["source"]
        if first["cell_type"] == "code" and source == want:
            continue
        bad.append(path.name)
        if fix and first["cell_type"] == "code" and "BOOK_REPOSITORY" in source:
            first["source"] = want
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name in bad:
        print(f"{name}: first cell is not the bootstrap cell{' (fixed)' if fix else ''}")
    return 1 if bad and not fix else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
