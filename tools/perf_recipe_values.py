"""The values tools/perf_recipe_reader.py computes with: Unknown (and why), config objects (Obj), names bound
outside the repository (External), the repository's functions and classes, and its parsed modules."""

from __future__ import annotations

import ast
from typing import Any

class Unknown:
    """A value the reader cannot resolve statically; `why` says what it depends on."""

    def __init__(self, why: str):
        self.why = why

    def __repr__(self) -> str:
        return f"Unknown({self.why})"


class Obj:
    """A config object: attribute -> value, and where each was written; fields never written are unknown."""

    def __init__(self, origin: str):
        self.origin, self.attrs, self.where = origin, {}, {}

    def read(self, name: str) -> Any:
        return self.attrs[name] if name in self.attrs else Unknown(f"{self.origin}.{name} is not set in code read")

    def section(self, name: str) -> "Obj":
        value = self.attrs.get(name)
        if not isinstance(value, Obj):
            value = self.attrs[name] = Obj(f"{self.origin}.{name}")
        return value


class External:
    """A name bound outside the repository (torch, a Megatron-Core class)."""

    def __init__(self, name: str):
        self.name = name


class Func:
    def __init__(self, module: "Module", node: ast.FunctionDef):
        self.module, self.node = module, node


class Cls:
    """A class the repository defines: calling it gives an Obj of its literal field defaults and the keywords."""

    def __init__(self, module: "Module", node: ast.ClassDef):
        self.module, self.node = module, node


class Return(Exception):
    def __init__(self, value: Any):
        self.value = value


def known(*values: Any) -> bool:
    return not any(isinstance(v, (Unknown, External)) for v in values)


PARSED: dict[str, ast.Module] = {}   # file text -> its tree


class Module:
    def __init__(self, reader: Any, dotted: str, path: str, text: str):   # reader: a perf_recipe_reader.Reader
        self.reader, self.dotted, self.path = reader, dotted, path
        self.tree = PARSED[text] if text in PARSED else PARSED.setdefault(text, ast.parse(text))
        self.funcs = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)}
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        self.imports: dict[str, tuple[str, str]] = {}
        self.consts = {n.targets[0].id: n.value for n in self.tree.body if isinstance(n, ast.Assign)
                       and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
        self.consts.update({n.target.id: n.value for n in self.tree.body if isinstance(n, ast.AnnAssign)
                            and isinstance(n.target, ast.Name) and n.value is not None})
        package = dotted if path.endswith("/__init__.py") else dotted.rpartition(".")[0]
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or node.level):
                # `from . import x as y` (a relative import: the package of this module, one level per dot)
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parent + ([node.module] if node.module else []))
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (base, alias.name)

    def lookup(self, name: str, depth: int = 0) -> Any:
        if name in self.funcs:
            return Func(self, self.funcs[name])
        if name in self.classes:
            return Cls(self, self.classes[name])
        if name in self.consts:
            return self.reader.evaluate(self.consts[name], {}, self)
        if name in self.imports and depth < 8:
            dotted, original = self.imports[name]
            module = self.reader.module(dotted)
            value = module.lookup(original, depth + 1) if module else External(f"{dotted}.{original}")
            if isinstance(value, External):   # `from package import submodule`: the module itself
                return self.reader.module(f"{dotted}.{original}") or value
            return value
        return External(name)


