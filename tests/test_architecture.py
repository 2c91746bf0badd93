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


# The unchecked cores of the attention step: library modules that have checked their own
# arguments call these (check once, where a call enters the library). No other private
# name crosses a module.
CORES = {"helpers.attention": {"_masked_softmax", "_attend", "_sdpa"}}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_module(module):
    for target, names, line in imports(module):
        allowed = CORES.get(target, set()) if layer(module) == 1 else set()
        private = [n for n in names if n.startswith("_") and n not in allowed]
        assert not private, f"{module}:{line} imports {private} from {target}"


def test_the_cores_exist_and_are_unchecked():
    """The allowed cores exist, and none of them calls a check: they are the maths alone."""
    tree = ast.parse(MODULES["helpers.attention"].read_text())
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name in CORES["helpers.attention"]:
        assert name in defs, f"helpers.attention has no core {name}"
        calls = [n for n in ast.walk(defs[name]) if _is_check_call(n)]
        assert not calls, f"the core {name} calls {ast.unparse(calls[0])}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    for target, _, line in imports(module):
        if target == "helpers":
            continue
        assert target in MODULES, f"{module}:{line} imports {target}, which does not exist"
        assert layer(target) <= layer(module), (
            f"{module}:{line} imports {target} from a higher layer"
        )


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
        "helpers.kernels",
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


# Validators: a private function named like one, or one whose body (docstring aside) only
# checks its arguments: calls of check_*/require, ``if …: raise``, ``try: … except: raise``,
# assignments from such calls, and a final ``return`` of a name.
VALIDATOR_NAME = re.compile(r"^_+(check|validate|require|as_|ensure|verify)")


def _is_check_call(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "require" or name.startswith("check_") or bool(VALIDATOR_NAME.match(name))


def _is_check_statement(node) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True  # a docstring
    if isinstance(node, ast.Expr | ast.Assign | ast.AnnAssign) and _is_check_call(node.value):
        return True
    if isinstance(node, ast.If):
        return all(isinstance(s, ast.Raise) for s in node.body) and all(
            _is_check_statement(s) for s in node.orelse
        )
    if isinstance(node, ast.Try):  # try: broadcast … except: raise (a context manager's
        # try: yield … except: raise is not a check)
        return not any(isinstance(n, ast.Yield) for n in ast.walk(node)) and all(
            any(isinstance(s, ast.Raise) for s in h.body) for h in node.handlers
        )
    if isinstance(node, ast.For):
        return all(_is_check_statement(s) for s in node.body)
    return isinstance(node, ast.Raise | ast.Pass)


def validators(source: str) -> list[str]:
    """The private functions of ``source`` that are validators, as ``name:line``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not node.name.startswith("_") or node.name.startswith("__"):
            continue
        body = list(node.body)
        last = body[-1].value if body and isinstance(body[-1], ast.Return) else False
        if last is None or isinstance(last, ast.Name | ast.Tuple) or _is_check_call(last):
            body = body[:-1]
        only_checks = all(_is_check_statement(s) for s in body)
        raises = any(
            (isinstance(n, ast.Raise) and "NotImplementedError" not in ast.unparse(n))
            or _is_check_call(n)
            for n in ast.walk(node)
        )
        if VALIDATOR_NAME.match(node.name) or (only_checks and raises):
            found.append(f"{node.name}:{node.lineno}")
    return found


def test_one_home_for_input_checks():
    """Validators live in helpers.checks only: no other module defines its own."""
    offenders = {
        module: validators(path.read_text())
        for module, path in MODULES.items()
        if module != "helpers.checks"
    }
    assert {m: v for m, v in offenders.items() if v} == {}


FIXTURE = """
def _check_even(n, name):
    if n % 2:
        raise ValueError(f"{name} must be even")

def _scale(scale, q):
    \"\"\"A validator by its body, not its name.\"\"\"
    if not isinstance(scale, float):
        raise ValueError("scale must be a float")
    return scale

def _token_id(value, name, size):
    value = check_int(value, name)
    require(value < size, f"{name} too large")
    return value

def _shifted(scores, m):
    if scores.dim() == 0:
        raise ValueError("scores must have an axis")
    return scores - m

def _as_tensor(x):
    return torch.as_tensor(x)

def _beta(beta):
    return check_real(beta, "beta", minimum=0)
"""


def test_the_validator_rule_finds_validators():
    """The rule is able to fail: it finds each kind of validator in a fixture, and passes a
    private function that computes something after its check."""
    assert validators(FIXTURE) == [
        "_check_even:2",
        "_scale:6",
        "_token_id:12",
        "_as_tensor:22",
        "_beta:25",
    ]
