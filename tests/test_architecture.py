"""The package's structure, checked from its source: layers, cycles, private names, the core.

The layers (README, "Layout"): the library (``helpers.<module>``) imports only the library;
``helpers.measure`` imports the library; ``helpers.tasks`` imports the library and
``helpers.measure``; ``helpers.figures`` may import all of them. Nothing imports a name that
starts with ``_`` from another module, no module re-exports through ``__getattr__``, and the
import graph has no cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "helpers"
MODULES = {
    ".".join(("helpers", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
        ".__init__"
    ): path
    for path in sorted(PACKAGE.rglob("*.py"))
}


def layer(module: str) -> int:
    """0 checks, 1 library, 2 measure, 3 tasks, 4 figures."""
    parts = module.split(".")
    if module == "helpers.checks" or module == "helpers":
        return 0
    if len(parts) > 2 or parts[-1] in ("tasks", "figures"):
        return {"tasks": 3, "figures": 4}[parts[1]]
    return 2 if parts[1] == "measure" else 1


def imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) of every ``helpers`` import in ``module``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "helpers" or target.startswith("helpers."):
                names = [alias.name for alias in node.names]
                submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
                if submodules:
                    found += [(sub, [], node.lineno) for sub in submodules]
                else:
                    found.append((target, names, node.lineno))
        elif isinstance(node, ast.Import):
            found += [
                (alias.name, [], node.lineno)
                for alias in node.names
                if alias.name.startswith("helpers")
            ]
    return found


def test_the_readme_layout_lists_every_module_once():
    """README's layout section has one line per module, and only modules that exist."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\s*- `(helpers(?:\.[a-z0-9_]+)+)`", section, re.M)
    real = sorted(m for m, p in MODULES.items() if p.name != "__init__.py")
    assert sorted(listed) == real


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_module(module):
    for target, names, line in imports(module):
        private = [n for n in names if n.startswith("_")]
        assert not private, f"{module}:{line} imports {private} from {target}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    for target, _, line in imports(module):
        if target == "helpers":
            continue
        assert target in MODULES, f"{module}:{line} imports {target}, which does not exist"
        assert layer(target) <= layer(module) or (
            layer(module) == 3 and layer(target) == 4 and target == "helpers.figures.plotting"
        ), f"{module}:{line} imports {target} from a higher layer"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_reexports_through_getattr(module):
    tree = ast.parse(MODULES[module].read_text())
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert "__getattr__" not in names and "__dir__" not in names


def test_the_import_graph_has_no_cycle():
    graph = {m: {t for t, _, _ in imports(m) if t in MODULES and t != m} for m in MODULES}
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [nxt])}")
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize(
    "module",
    [
        "helpers.scoring",
        "helpers.multihead",
        "helpers.selfattention",
        "helpers.transformer",
        "helpers.seq2seq",
        "helpers.kvcache",
    ],
)
def test_attention_modules_use_the_one_core(module):
    """No attention module computes its own softmax or weighted sum: they call the core."""
    source = MODULES[module].read_text()
    calls = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
    }
    assert not calls & {"softmax", "baddbmm", "bmm", "log_softmax"}, (
        f"{module} computes attention itself instead of calling helpers.attention"
    )
    assert re.search(r"from helpers\.(attention|multihead|transformer) import", source)


def test_one_home_for_input_checks():
    """Validators live in helpers.checks; modules keep no generic _check_int-like copies."""
    generic = re.compile(
        r"^def _(check_(int|size|dim|positive|dropout|tensor|bool_mask|probability"
        r"|positive_int|positive_scalar)|positive_int|probability)\b",
        re.M,
    )
    offenders = [m for m, p in MODULES.items() if generic.search(p.read_text())]
    assert offenders == []
