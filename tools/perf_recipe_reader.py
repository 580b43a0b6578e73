"""Read a Megatron-Bridge flat performance recipe (src/megatron/bridge/perf_recipes/, v0.6.0 on) without running
it: an abstract interpreter over the `ast` of the recipe function and of every function it calls that the
repository defines (family common.py, perf_recipes/_common.py, the base recipe under recipes/, what those
call), resolved through the modules' imports at one commit.

It evaluates literals, names, attribute reads and writes on config objects, calls (arguments bound to the
callee's parameters and defaults), `if` on values it knows (a helper's `if compute_dtype == "fp8_mx"` on the
call's literal argument), comparisons, integer arithmetic (+ - * // %), and/or/not, dicts with `**`, getattr / hasattr, max / min, and a repository
dataclass called (its literal field defaults, then the keywords). What it cannot know is an `Unknown` saying
why, never a guess: the result of code outside the repository (torch, AutoBridge), which may also change any
object handed to it (its fields become Unknown; a class name called, CommOverlapConfig(tp_comm_overlap=True),
holds the keywords given, its other fields unknown); a field written under an `if` it cannot decide (either
branch, and all that follows a `return` there), in a loop, a `try` or a `with`.
Each field keeps where it was last written (path:line), so an entry can cite the statement.
"""

from __future__ import annotations

import ast
import operator
import subprocess
from typing import Any, Callable

from perf_recipe_values import Cls, External, Func, Module, Obj, Return, Unknown, known


UNPACKED = "<**>"   # the keyword under which a call's `**` of a value not resolved is passed on
SCRIPT_PACKAGES = ("utils", "configs")   # scripts/performance/'s packages (the workload configs' releases)
TEXTS: dict[tuple[str, str], str | None] = {}   # (commit, path) -> file text, shared by the readers of a run
BUILTINS = {"getattr": getattr, "hasattr": hasattr, "isinstance": isinstance, "int": int, "float": float,
            "bool": bool, "str": str, "len": len, "list": list, "dict": dict, "max": max, "min": min}
# numbers only (a list's + or a string's % stays unresolved): the recipes size groups from the GPU count
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
              ast.Mod: operator.mod}
COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b, ast.Gt: operator.gt, ast.Lt: operator.lt,
           ast.GtE: operator.ge, ast.LtE: operator.le}


class Reader:
    """Interprets recipe functions of one commit of a Megatron-Bridge git directory."""

    def __init__(self, show: Callable[[str], str | None], runtime: dict[str, Any] | None = None):
        """`runtime`: facts of the run the recipe names, for code that asks at run time: an outside call's
        result by its dotted name ("torch.cuda.get_device_properties": an Obj of the recipe's GPU), a repository
        function's result that depends on the installed Megatron-Core (by its dotted name), or a config field no
        code read sets ("num_moe_experts", from the model's Hugging Face config)."""
        self.show, self.modules, self.may, self.depth = show, {}, 0, 0
        self.runtime = runtime or {}

    @classmethod
    def at_commit(cls, repo: str, commit: str, runtime: dict[str, Any] | None = None) -> "Reader":
        def show(path: str) -> str | None:
            if (commit, path) not in TEXTS:
                done = subprocess.run(["git", "--git-dir", repo, "show", f"{commit}:{path}"], capture_output=True,
                                      text=True)
                TEXTS[commit, path] = done.stdout if done.returncode == 0 else None
            return TEXTS[commit, path]
        return cls(show, runtime)

    def module(self, dotted: str) -> Module | None:
        if dotted not in self.modules:
            self.modules[dotted] = None
            # the package's code under src/; scripts/performance/'s own packages (utils, configs: run_script.py
            # runs from that directory) under it
            root = "src/" if dotted.startswith("megatron.bridge") else \
                "scripts/performance/" if dotted.split(".")[0] in SCRIPT_PACKAGES else None
            base = f"{root}{dotted.replace('.', '/')}"
            for path in (base + ".py", base + "/__init__.py"):
                text = self.show(path) if root else None
                if text is not None:
                    self.modules[dotted] = Module(self, dotted, path, text)
                    break
        return self.modules[dotted]

    def call_function(self, dotted: str, name: str) -> Any:
        """The value the module's function `name` returns when called with no arguments."""
        return self.call(Func(self.module(dotted), self.module(dotted).funcs[name]), [], {})

    def call(self, func: Func, args: list, kwargs: dict) -> Any:
        node, scope = func.node, {}
        params = node.args.posonlyargs + node.args.args
        defaults = [None] * (len(params) - len(node.args.defaults)) + list(node.args.defaults)
        for i, (param, default) in enumerate(zip(params, defaults)):
            if i < len(args):
                scope[param.arg] = args[i]
            elif param.arg in kwargs:
                scope[param.arg] = kwargs[param.arg]
            else:
                scope[param.arg] = self.evaluate(default, {}, func.module) if default else Unknown(param.arg)
        for param, default in zip(node.args.kwonlyargs, node.args.kw_defaults):
            scope[param.arg] = kwargs.get(param.arg, self.evaluate(default, {}, func.module) if default else None)
        named = {p.arg for p in params + node.args.kwonlyargs}
        if UNPACKED in kwargs:   # a `**` of a value not resolved: any parameter not given by name may be in it
            for param in named - set(kwargs) - {p.arg for p in params[:len(args)]}:
                scope[param] = Unknown(kwargs[UNPACKED])
        if node.args.kwarg:   # `**user_kwargs`: the keywords no parameter takes
            scope[node.args.kwarg.arg] = Unknown(kwargs[UNPACKED]) if UNPACKED in kwargs else \
                {k: v for k, v in kwargs.items() if k not in named}
        if self.depth > 20:
            return Unknown(f"{node.name}: calls nested too deep")
        self.depth, saved = self.depth + 1, self.may
        try:
            self.block(node.body, scope, func.module)
            value = None
        except Return as done:
            value = done.value
        finally:
            self.may, self.depth = saved, self.depth - 1
        maybe = scope.get("<returns>", [])
        if maybe and any(v is not value for v in maybe):
            return Unknown(f"{node.name} returns under a condition not resolved statically")
        return value

    def block(self, body: list[ast.stmt], scope: dict, mod: Module) -> None:
        for stmt in body:
            self.statement(stmt, scope, mod)

    def statement(self, stmt: ast.stmt, scope: dict, mod: Module) -> None:
        where = f"{mod.path}:{stmt.lineno}"
        if isinstance(stmt, ast.Assign):
            value = self.evaluate(stmt.value, scope, mod)
            for target in stmt.targets:
                self.assign(target, value, scope, mod, where)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            value = self.evaluate(stmt.value, scope, mod) if isinstance(stmt, ast.AnnAssign) else Unknown(where)
            self.assign(stmt.target, value, scope, mod, where)
        elif isinstance(stmt, ast.Expr):
            self.evaluate(stmt.value, scope, mod)
        elif isinstance(stmt, ast.Return):
            value = self.evaluate(stmt.value, scope, mod) if stmt.value else None
            if self.may:   # a return under a condition not resolved: the rest of the function may not run
                scope.setdefault("<returns>", []).append(value)
                return
            raise Return(value)
        elif isinstance(stmt, ast.Raise):
            if not self.may:
                raise Return(Unknown(f"raises at {where}"))
        elif isinstance(stmt, ast.If):
            test = self.truth(self.evaluate(stmt.test, scope, mod))
            if isinstance(test, Unknown):
                self.may_run(stmt.body + stmt.orelse, scope, mod, f"a condition not resolved statically at {where}")
            else:
                self.block(stmt.body if test else stmt.orelse, scope, mod)
        elif isinstance(stmt, (ast.For, ast.While, ast.Try, ast.With)):
            bodies = [getattr(stmt, k, []) for k in ("body", "orelse", "finalbody")]
            bodies += [h.body for h in getattr(stmt, "handlers", [])]
            if isinstance(stmt, ast.For):
                self.assign(stmt.target, Unknown(f"loop variable at {where}"), scope, mod, where)
            self.may_run([s for b in bodies for s in b], scope, mod, f"a loop, try or with block at {where}")
        # pass, imports, nested definitions, asserts, del: no effect on the fields read

    def may_run(self, body: list[ast.stmt], scope: dict, mod: Module, why: str) -> None:
        self.may += 1
        outer, scope["<why>"] = scope.get("<why>"), why
        try:
            self.block(body, scope, mod)
        finally:
            self.may -= 1
            scope["<why>"] = outer
        if scope.get("<returns>") and not scope.get("<returned>"):   # what follows a conditional return may not run
            self.may += 1
            scope["<returned>"], scope["<why>"] = True, f"code after a return under {why}"

    def assign(self, target: ast.expr, value: Any, scope: dict, mod: Module, where: str) -> None:
        if self.may:
            value = Unknown(f"written under {scope.get('<why>', 'a condition')}")
        if isinstance(target, ast.Name):
            scope[target.id] = value
        elif isinstance(target, ast.Attribute):
            owner = self.container(target.value, scope, mod)
            if isinstance(owner, Obj):
                owner.attrs[target.attr], owner.where[target.attr] = value, where
        elif isinstance(target, ast.Subscript):
            owner, key = self.evaluate(target.value, scope, mod), self.evaluate(target.slice, scope, mod)
            if isinstance(owner, dict) and known(key):
                owner[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            known_items = isinstance(value, (tuple, list)) and len(value) == len(target.elts)
            for i, element in enumerate(target.elts):
                self.assign(element, value[i] if known_items else Unknown(f"unpacked at {where}"), scope, mod, where)

    def container(self, node: ast.expr, scope: dict, mod: Module) -> Any:
        """The object an attribute is written on (`cfg.model` in `cfg.model.x = 1`): a section is made when absent."""
        if isinstance(node, ast.Attribute):
            owner = self.container(node.value, scope, mod)
            return owner.section(node.attr) if isinstance(owner, Obj) else Unknown("not an object")
        return self.evaluate(node, scope, mod)

    def truth(self, value: Any) -> Any:
        if isinstance(value, (Unknown, External)):
            return value if isinstance(value, Unknown) else Unknown("an outside value")
        return True if isinstance(value, Obj) else bool(value)

    def evaluate(self, node: ast.expr, scope: dict, mod: Module) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return scope[node.id] if node.id in scope else mod.lookup(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.evaluate(node.value, scope, mod)
            if isinstance(owner, Obj):
                return self.read(owner, node.attr)
            if isinstance(owner, Module):   # a module imported by name: `base_cfgs.NAME`
                return owner.lookup(node.attr)
            return External(f"{owner.name}.{node.attr}") if isinstance(owner, External) else Unknown(node.attr)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self.evaluate(e, scope, mod) for e in node.elts]
            return {ast.List: list, ast.Tuple: tuple, ast.Set: list}[type(node)](items)
        if isinstance(node, ast.Dict):
            out = {}
            for key, value in zip(node.keys, node.values):
                value = self.evaluate(value, scope, mod)
                if key is None:
                    if not isinstance(value, dict):
                        return Unknown("a ** of a value not resolved")
                    out.update(value)
                else:
                    out[self.evaluate(key, scope, mod)] = value
            return out
        if isinstance(node, ast.Call):
            return self.evaluate_call(node, scope, mod)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self.compare(node.ops[0], self.evaluate(node.left, scope, mod),
                                self.evaluate(node.comparators[0], scope, mod))
        if isinstance(node, ast.BoolOp):
            value = None
            for operand in node.values:
                value = self.evaluate(operand, scope, mod)
                truth = self.truth(value)
                if isinstance(truth, Unknown):
                    return truth
                if truth == isinstance(node.op, ast.Or):
                    return value
            return value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            truth = self.truth(self.evaluate(node.operand, scope, mod))
            return truth if isinstance(truth, Unknown) else not truth
        if isinstance(node, ast.IfExp):
            truth = self.truth(self.evaluate(node.test, scope, mod))
            return truth if isinstance(truth, Unknown) else self.evaluate(node.body if truth else node.orelse,
                                                                          scope, mod)
        if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:   # num_gpus // _GB300_NVLINK_DOMAIN_GPUS
            left, right = self.evaluate(node.left, scope, mod), self.evaluate(node.right, scope, mod)
            if isinstance(left, (int, float)) and isinstance(right, (int, float)) \
                    and not isinstance(left, bool) and not isinstance(right, bool):
                try:
                    return ARITHMETIC[type(node.op)](left, right)
                except ZeroDivisionError:
                    pass
            return Unknown(f"arithmetic on a value not resolved at {mod.path}:{node.lineno}")
        if isinstance(node, ast.Subscript):
            owner, key = self.evaluate(node.value, scope, mod), self.evaluate(node.slice, scope, mod)
            try:
                return owner[key] if isinstance(owner, (dict, list, tuple)) and known(key) else Unknown("subscript")
            except (KeyError, IndexError, TypeError):
                return Unknown("subscript")
        return Unknown(f"{type(node).__name__} at {mod.path}:{getattr(node, 'lineno', '?')}")

    def compare(self, op: ast.cmpop, left: Any, right: Any) -> Any:
        if isinstance(op, (ast.Is, ast.IsNot)) and right is None and isinstance(left, Obj):
            return isinstance(op, ast.IsNot)
        if not known(left, right) or isinstance(left, Obj) or isinstance(right, Obj):
            return Unknown("a comparison of a value not resolved")
        try:
            return COMPARE[type(op)](left, right)
        except (TypeError, KeyError):
            return Unknown("a comparison")

    def evaluate_call(self, node: ast.Call, scope: dict, mod: Module) -> Any:
        args = [self.evaluate(a, scope, mod) for a in node.args if not isinstance(a, ast.Starred)]
        kwargs = {}
        for keyword in node.keywords:   # in order: a later keyword or `**` entry replaces an earlier one
            value = self.evaluate(keyword.value, scope, mod)
            if keyword.arg:
                kwargs[keyword.arg] = value
            elif isinstance(value, dict):
                kwargs.update(value)
            else:
                kwargs[UNPACKED] = f"passed in a ** of a value not resolved at {mod.path}:{node.lineno}"
        if isinstance(node.func, ast.Name) and node.func.id in BUILTINS and node.func.id not in scope:
            return self.builtin(node.func.id, args)
        func = self.evaluate(node.func, scope, mod)
        if isinstance(func, External) and func.name in self.runtime:
            return self.runtime[func.name]
        if isinstance(func, External) and func.name == "dataclasses.replace" and args and isinstance(args[0], Obj):
            made = Obj(args[0].origin)   # a copy with the keywords replaced
            made.attrs.update(args[0].attrs)
            made.where.update(args[0].where)
            return self.with_keywords(made, kwargs, node, mod)
        if isinstance(func, Func) and f"{func.module.dotted}.{func.node.name}" in self.runtime:  # a fact of the install
            return self.runtime[f"{func.module.dotted}.{func.node.name}"]
        if isinstance(node.func, ast.Attribute) and f".{node.func.attr}" in self.runtime:
            return self.runtime[f".{node.func.attr}"]   # a method of an object outside the code read, as a fact
        if isinstance(node.func, ast.Attribute) and isinstance(func, Unknown):   # a method of a literal
            owner, method = self.evaluate(node.func.value, scope, mod), node.func.attr
            if isinstance(owner, str) and method in ("startswith", "endswith", "lower") and known(*args) \
                    or isinstance(owner, (list, dict)) and method in ("append", "extend", "update", "get"):
                return getattr(owner, method)(*args)
        if isinstance(func, Func):
            return self.call(func, args, kwargs)
        name = func.node.name if isinstance(func, Cls) else func.name if isinstance(func, External) \
            else ast.unparse(node.func)
        if isinstance(func, Cls) or isinstance(func, External) and name.rsplit(".", 1)[-1][:1].isupper():
            made = Obj(name.rsplit(".", 1)[-1])   # a class: its literal field defaults (read where the
            for field in func.node.body if isinstance(func, Cls) else []:   # repository defines it), the keywords
                if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and field.value:
                    value = self.evaluate(field.value, {}, func.module)
                    if not isinstance(value, (Unknown, External)):
                        made.attrs[field.target.id] = value
                        made.where[field.target.id] = f"{func.module.path}:{field.lineno}"
            return self.with_keywords(made, kwargs, node, mod)
        why = f"may be changed by {name}() at {mod.path}:{node.lineno}"
        for arg in args + list(kwargs.values()):   # code not read may change an object handed to it
            self.taint(arg, why)
        return Unknown(f"{name}() at {mod.path}:{node.lineno} is outside the code read")

    @staticmethod
    def with_keywords(made: Obj, kwargs: dict, node: ast.Call, mod: Module) -> Obj:
        """`made` with a call's keywords set, each cited at its own line; a `**` of a value not resolved may set
        any field: those not named are unknown."""
        if UNPACKED in kwargs:
            made.attrs = {k: Unknown(kwargs[UNPACKED]) for k in made.attrs}
        made.attrs.update({k: v for k, v in kwargs.items() if k != UNPACKED})
        made.where.update({k.arg: f"{mod.path}:{k.value.lineno}" for k in node.keywords if k.arg})
        return made

    def taint(self, value: Any, why: str) -> None:
        if isinstance(value, Obj):
            for attr, held in list(value.attrs.items()):
                if isinstance(held, Obj):
                    self.taint(held, why)
                else:
                    value.attrs[attr] = Unknown(why)

    def read(self, owner: Obj, name: str) -> Any:
        value = owner.read(name)
        return self.runtime[name] if isinstance(value, Unknown) and name in self.runtime else value

    def builtin(self, name: str, args: list) -> Any:
        if name in ("getattr", "hasattr") and args and isinstance(args[0], Obj) and isinstance(args[1], str):
            value = self.read(args[0], args[1])
            if name == "hasattr":
                return True if not isinstance(value, Unknown) else Unknown(value.why)
            return value
        if name == "isinstance" and args and isinstance(args[0], Obj):
            return False   # a config object is none of the builtin types the recipes test for (str)
        if name not in ("getattr", "hasattr", "isinstance") and args and known(*args) \
                and not any(isinstance(a, Obj) for a in args):
            try:
                return BUILTINS[name](*args)
            except (TypeError, ValueError):
                pass
        return Unknown(f"{name}() of a value not resolved")
