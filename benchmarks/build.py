"""Build and execution times of the book, against the budgets in README (*Budgets*).

    python benchmarks/build.py [--skip-build] [--skip-execute] [--toc FILE] [--json PATH]
                               [chapters/NN_name.ipynb ...]

What is measured, and how:

(a) Clean build: ``jupyter-book build . --path-output <tmpdir> -W -n --keep-going`` into a
    fresh temporary folder (never _build/), wall-clock time of the whole command.
(b) No-op rebuild: the same command again with nothing changed. Budget: 15 s.
(b') The Chinese edition's clean build (``--config`` written by ``book/tools/zh.py config``,
    ``--toc _toc.zh.yml``) into the same temporary folder's ``zh/``, alone (no budget: it
    parses each of its translated messages on its own, which the English build does not).
(b'') Both editions' clean builds side by side, as ``make book`` runs them (two processes),
    into fresh folders: the wall-clock time until both have ended. Budget: twice the English
    clean build's time (a).
(c) Chapter execution: each chapter (default: chapters/*.ipynb) is read and run top to
    bottom in a fresh kernel with nbclient, as ``book/tools/execute.py`` does (widget
    state stored, working directory chapters/), but on the in-memory copy only: the
    notebook file is never written. The time includes kernel start-up. Budget: 60 s each
    (the budget assumes a 2-core machine; the core count is printed).

Prints a table with budgets and OK / OVER BUDGET (FAILED for a build that failed or warned,
or a chapter that raised), then a last line: ``all budgets met`` (exit code 0) or ``budget
missed: <figures>`` (exit code 1) when any figure is OVER BUDGET or FAILED (a failed run
cannot show that its budget is met). Exit code 1 also on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import budget_exit  # benchmarks/common.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
REBUILD_BUDGET = 15.0  # s
CHAPTER_BUDGET = 60.0  # s
TIMEOUT_PER_CELL = 300  # s, as in book/tools/execute.py


def jupyter_book() -> str:
    local = Path(sys.executable).with_name("jupyter-book")
    found = str(local) if local.exists() else shutil.which("jupyter-book")
    if not found:
        sys.exit("error: jupyter-book not found: run make book first (it installs the venv)")
    return found


def build_command(out: Path, toc: Path | None, config: Path | None = None) -> list[str]:
    cmd = [jupyter_book(), "build", ".", "--path-output", str(out), "-W", "-n", "--keep-going"]
    if toc:
        cmd += ["--toc", str(toc)]
    if config:
        cmd += ["--config", str(config)]
    return cmd


def timed_builds(*commands: list[str]) -> dict:
    """Run the builds side by side; return the seconds until all have ended, the worst exit
    code and the warning count."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for cmd in commands
    ]
    logs = [proc.communicate()[0] for proc in procs]
    seconds = time.perf_counter() - start
    log = re.sub(r"\x1b\[[0-9;]*m", "", "".join(logs))  # Sphinx colours its warnings
    problems = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    return {
        "seconds": seconds,
        "returncode": max(proc.returncode for proc in procs),
        "warnings": len(problems),
        "problems": problems[:20],
    }


def timed_build(out: Path, toc: Path | None, config: Path | None = None) -> dict:
    """Run one build into ``out``; return seconds, exit code and the warning count."""
    return timed_builds(build_command(out, toc, config))


def bench_build(toc: Path | None) -> list[dict]:
    if not (ROOT / "book" / "vendor").is_dir():
        print(
            "warning: book/vendor is missing (run make book first); the offline JS "
            "assets will be absent from this build",
            file=sys.stderr,
        )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        out = Path(tmp)
        print(f"Building into {out} ...", flush=True)
        clean = timed_build(out, toc)
        rows.append({"figure": "clean build", "budget_s": None, **clean})
        print(f"  clean build: {clean['seconds']:.1f} s (exit {clean['returncode']})", flush=True)
        noop = timed_build(out, toc)
        rows.append({"figure": "no-op rebuild", "budget_s": REBUILD_BUDGET, **noop})
        print(f"  no-op rebuild: {noop['seconds']:.1f} s (exit {noop['returncode']})", flush=True)
        if clean["returncode"] or noop["returncode"]:
            print("  the build failed or warned (times are still reported):")
            for line in clean["problems"][:10]:
                print(f"    {line}")
        zh_toc = ROOT / "_toc.zh.yml"
        zh = timed_build(out / "zh", zh_toc, zh_config(out / "zh"))
        rows.append({"figure": "Chinese edition alone, clean build", "budget_s": None, **zh})
        print(f"  Chinese edition alone: {zh['seconds']:.1f} s (exit {zh['returncode']})")
        both = timed_builds(
            build_command(out / "both", toc),
            build_command(out / "both-zh", zh_toc, zh_config(out / "both-zh")),
        )
        rows.append(
            {
                "figure": "both editions side by side (make book)",
                "budget_s": 2 * clean["seconds"],
                **both,
            }
        )
        print(f"  both editions side by side: {both['seconds']:.1f} s", flush=True)
        for line in (zh["problems"] + both["problems"])[:10]:
            print(f"    {line}")
    return rows


def zh_config(folder: Path) -> Path:
    """The Chinese edition's config for a build into ``folder`` (book/tools/zh.py config)."""
    config = folder / "_config.zh.yml"
    subprocess.run(
        [sys.executable, str(ROOT / "book" / "tools" / "zh.py"), "config", str(config)],
        cwd=ROOT,
        check=True,
    )
    return config


def execute_copy(path: Path) -> dict:
    """Execute an in-memory copy of ``path`` in a fresh kernel; never write the file."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)  # a copy: the file on disk is left as it is
    client = NotebookClient(
        nb,
        timeout=TIMEOUT_PER_CELL,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    error = None
    start = time.perf_counter()
    try:
        client.execute()
    except Exception as exc:  # a failing cell: report it, keep benchmarking the others
        error = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        )
    seconds = time.perf_counter() - start
    return {
        "figure": f"execute {path.name}",
        "budget_s": CHAPTER_BUDGET,
        "seconds": seconds,
        "cells": len(nb.cells),
        "error": error,
    }


def bench_execute(paths: list[Path]) -> list[dict]:
    rows = []
    if not paths:
        print("No chapter notebooks found in chapters/: nothing to execute")
    for path in paths:
        print(
            f"Executing {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ...",
            flush=True,
        )
        row = execute_copy(path)
        rows.append(row)
        print(
            f"  {row['seconds']:.1f} s" + (f"  FAILED: {row['error']}" if row["error"] else ""),
            flush=True,
        )
    return rows


def verdict(row: dict) -> str:
    if row.get("returncode") or row.get("error"):
        return "FAILED"
    if row["budget_s"] is None:
        return "-"
    return "OK" if row["seconds"] <= row["budget_s"] else "OVER BUDGET"


def report(rows: list[dict]) -> None:
    print(f"\n{'figure':44} {'time':>9} {'budget':>9}  verdict")
    for row in rows:
        budget = f"{row['budget_s']:.0f} s" if row["budget_s"] else "-"
        note = ""
        if "returncode" in row:
            note = f"  (exit {row['returncode']}, {row['warnings']} warning/error lines)"
        elif row.get("error"):
            note = f"  ({row['error'][:70]})"
        print(f"{row['figure']:44} {row['seconds']:7.1f} s {budget:>9}  {verdict(row)}{note}")
    over = [r["figure"] for r in rows if verdict(r) == "OVER BUDGET"]
    failed = [r["figure"] for r in rows if verdict(r) == "FAILED"]
    print(
        f"\nSummary on {os.cpu_count()} cores: "
        + (f"OVER BUDGET: {', '.join(over)}" if over else "all within budget")
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="chapters to execute (default: chapters/*.ipynb)"
    )
    parser.add_argument("--skip-build", action="store_true", help="skip (a) and (b)")
    parser.add_argument("--skip-execute", action="store_true", help="skip (c)")
    parser.add_argument("--toc", type=Path, help="build with this table of contents")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if not (ROOT / "_config.yml").is_file():
        print(f"error: {ROOT} holds no _config.yml: is this the book?", file=sys.stderr)
        return 1
    rows = []
    if not args.skip_build:
        rows += bench_build(args.toc.resolve() if args.toc else None)
    if not args.skip_execute:
        paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "chapters").glob("*.ipynb"))
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            print(f"error: no such notebook: {', '.join(missing)}", file=sys.stderr)
            return 1
        rows += bench_execute(paths)
    report(rows)
    if args.json:
        args.json.write_text(json.dumps({"cores": os.cpu_count(), "figures": rows}, indent=2))
        print(f"wrote {args.json}")
    met = {"OK": True, "-": None}  # "-": no budget; OVER BUDGET and FAILED are misses
    return budget_exit(
        (f"{row['figure']} {row['seconds']:.1f} s ({verdict(row)})", met.get(verdict(row), False))
        for row in rows
    )


if __name__ == "__main__":
    sys.exit(main())
