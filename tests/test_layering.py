"""The tree follows the data flow: no package imports from one above it.

Layers, lowest first (a module may import its own layer's packages and any layer below):
  0 shared helpers: commbench (errors, units, dtypes, __init__), commbench.data
  1 comm (launch, backends, topology), moe (routing, byte accounting)
  2 results (records, provenance, compare, render, report, importers), collectives
  3 measure (harness, bench), emulate, costmodel
  4 sweep
  5 planner
  6 workflows (tune, verify)
  7 cli (and commbench/__main__.py, which only starts it)
Within one layer, the pairs listed in FORBIDDEN_SAME_LAYER must not import each other either.
Imports are read from the source (every `import` / `from ... import`, inside functions too).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

LAYERS: dict[str, int] = {
    "commbench": 0, "commbench.data": 0,
    "commbench.comm": 1, "commbench.moe": 1,
    "commbench.results": 2, "collectives": 2,
    "commbench.measure": 3, "commbench.emulate": 3, "commbench.costmodel": 3,
    "commbench.sweep": 4,
    "commbench.planner": 5,
    "commbench.workflows": 6,
    "commbench.cli": 7, "commbench.__main__": 7,
}
FORBIDDEN_SAME_LAYER = {
    ("commbench.costmodel", "commbench.measure"), ("commbench.measure", "commbench.costmodel"),
    ("commbench.results", "collectives"),
    ("commbench.costmodel", "commbench.emulate"), ("commbench.measure", "commbench.emulate"),
}


def package_of(module: str) -> str | None:
    """The layered package a dotted module name belongs to (longest match), or None if not ours."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYERS:
            return name
    return None


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from commbench import x` imports the module commbench.x when there is one
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def source_files() -> list[pathlib.Path]:
    return sorted(p for top in ("commbench", "collectives") for p in (ROOT / top).rglob("*.py"))


def violations(path: pathlib.Path) -> list[str]:
    importer = package_of(module_name(path))
    assert importer is not None, path
    bad = []
    for lineno, target in imported_modules(path):
        imported = package_of(target)
        if imported is None or imported == importer:
            continue
        if (imported == "commbench" and target.count(".") >= 1
                and not (ROOT / (target.replace(".", "/") + ".py")).exists()):
            continue  # `from commbench import __version__`: a name, not a module
        upward = LAYERS[imported] > LAYERS[importer]
        if upward or (importer, imported) in FORBIDDEN_SAME_LAYER:
            bad.append(f"{path.relative_to(ROOT)}:{lineno} ({importer}, layer {LAYERS[importer]}) "
                       f"imports {target} ({imported}, layer {LAYERS[imported]})")
    return bad


def test_every_package_has_a_layer():
    for path in source_files():
        assert package_of(module_name(path)) is not None, f"{path}: add its package to LAYERS"


def test_no_package_imports_from_a_layer_above_it():
    bad = [line for path in source_files() for line in violations(path)]
    assert not bad, "imports against the data flow:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, expected", [
    ("from commbench.planner.step.evaluate import evaluate_layouts\n", True),   # costmodel -> planner: upward
    ("from commbench.measure.harness import measure_point\n", True),   # costmodel <-> measure: same layer, apart
    ("from commbench.results.records import Measurement\n", False),    # downward: allowed
    ("def f():\n    from commbench.cli.base import console\n", True),  # inside a function too
])
def test_the_check_catches_an_upward_import(tmp_path, monkeypatch, source, expected):
    fake = ROOT / "commbench" / "costmodel" / "_layering_probe.py"
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, encoding=None: source)
    assert bool(violations(fake)) is expected


# Inside the planner, its stages (issue 24): each subpackage imports only the stages before it;
# calibrate sits beside search and neither imports the other; the package's own __init__ (the
# stable API) re-exports and sits on top, so no stage may import `commbench.planner` itself.
PLANNER_STAGES: dict[str, int] = {
    "commbench.planner.models": 0, "commbench.planner.layout": 1, "commbench.planner.step": 2,
    "commbench.planner.search": 3, "commbench.planner.calibrate": 3, "commbench.planner.emit": 4,
    "commbench.planner": 5,
}
FORBIDDEN_SAME_STAGE = {("commbench.planner.search", "commbench.planner.calibrate"),
                        ("commbench.planner.calibrate", "commbench.planner.search")}


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in PLANNER_STAGES:
            return ".".join(parts[:n])
    return None


def stage_violations(path: pathlib.Path) -> list[str]:
    importer = stage_of(module_name(path))
    if importer is None or importer == "commbench.planner":
        return []
    bad = []
    for lineno, target in imported_modules(path):
        imported = stage_of(target)
        if imported is None or imported == importer:
            continue
        if (imported == "commbench.planner" and target != "commbench.planner"
                and not (ROOT / target.replace(".", "/")).with_suffix(".py").exists()):
            continue  # `from commbench.planner.step import evaluate` also yields a name, not a module
        if PLANNER_STAGES[imported] > PLANNER_STAGES[importer] or (importer, imported) in FORBIDDEN_SAME_STAGE:
            bad.append(f"{path.relative_to(ROOT)}:{lineno} (stage {importer}) imports {target} (stage {imported})")
    return bad


def test_planner_stages_import_only_earlier_stages():
    planner = ROOT / "commbench" / "planner"
    loose = [p.name for p in planner.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"every planner module belongs to a stage subpackage: {loose}"
    bad = [line for path in sorted(planner.rglob("*.py")) for line in stage_violations(path)]
    assert not bad, "planner imports against its stages:\n" + "\n".join(bad)


@pytest.mark.parametrize("module, source, expected", [
    ("step/_probe.py", "from commbench.planner.search.space import search\n", True),      # step -> search: later stage
    ("calibrate/_probe.py", "from commbench.planner.search.explain import explain\n", True),  # beside: apart
    ("layout/_probe.py", "from commbench.planner import Layout\n", True),              # the API package
    ("emit/_probe.py", "from commbench.planner.step.terms import CALIBRATED\n", False),  # earlier: allowed
])
def test_the_stage_check_catches_a_later_import(monkeypatch, module, source, expected):
    fake = ROOT / "commbench" / "planner" / module
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, encoding=None: source)
    assert bool(stage_violations(fake)) is expected
