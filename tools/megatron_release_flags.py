"""Write commbench/data/megatron-release-flags.json: how each recipe-table release's Megatron-LM parse_args differs
from core_v0.16.1's (the release the emitted arguments are checked against, emit/megatron.megatron_target).

    python tools/megatron_release_flags.py /path/to/Megatron-LM.git > commbench/data/megatron-release-flags.json

(a git directory of github.com/NVIDIA/Megatron-LM with the core_v* tags and the commits the releases' Megatron-Bridge
3rdparty/Megatron-LM submodules pin.)

The tree of each release: the submodule commit commbench/data/recipes.json names in that release's megatron_core
source; a release without a submodule (25.09, Megatron-Bridge v0.1.0rc3, which pins a megatron-core range) reads the
tag of its range's lower bound, core_v<MAJOR.MINOR>.0. Each tree is `git archive`d, and its own
megatron/training/arguments.py add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False)) is run in a
fresh Python with that tree's megatron.core ahead of site-packages (so parse_args is the release's own, every flag a
TransformerConfig field generates included). Each option is recorded as (nargs, choices, takes a value). Written per
release: "lacks", the options core_v0.16.1's parser has and the release's has not; "differs", the options whose
nargs, choices or value-taking differ from core_v0.16.1's (the release's own spec); "hybrid_symbols", the layer
symbols its hybrid allocator takes in --hybrid-override-pattern (the class Symbols' VALID / VALID_LAYERS in
megatron/core/ssm/mamba_hybrid_layer_allocation.py, megatron/core/models/hybrid/hybrid_layer_allocation.py from
megatron-core 0.18): 'E' (MoE layers) first in core_v0.16.0 (9a1c0d05c9, "Add MoE layer type to hybrid models
(#2259)"). The planner reads it in commbench/planner/layout/release_flags.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "core_v0.16.1"

# Run inside the tree's interpreter: the parser's options as {option: [nargs, choices, takes_value]}.
DUMP = r"""
import sys, os, types, json, argparse, typing, warnings
warnings.simplefilter("ignore")
root = sys.argv[1]
sys.path.insert(0, root)
if not hasattr(typing, "override"):
    typing.override = lambda f: f
from unittest import mock
class _Stub(mock.MagicMock):
    __version__ = "3.4.0"
for name in ("megatron.core.transformer.moe.ops.paged_stash", "megatron.core.transformer.moe.paged_stash"):
    sys.modules.setdefault(name, _Stub(name=name))
import importlib.util
training = os.path.join(root, "megatron", "training")
pkg = types.ModuleType("megatron.training"); pkg.__path__ = [training]; sys.modules["megatron.training"] = pkg
def load(name):
    spec = importlib.util.spec_from_file_location(f"megatron.training.{name}", os.path.join(training, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod); return mod
gv = load("global_vars")
for n in ("get_args", "get_timers", "get_adlr_autoresume"):
    if hasattr(gv, n): setattr(pkg, n, getattr(gv, n))
A = load("arguments")
import megatron.core
assert megatron.core.__file__.startswith(root), megatron.core.__file__
p = A.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
out = {}
for act in p._actions:
    for opt in act.option_strings:
        if opt.startswith("--"):
            choices = sorted(str(c) for c in act.choices) if act.choices is not None else None
            out[opt] = [act.nargs if isinstance(act.nargs, (str, type(None))) else int(act.nargs), choices,
                        act.nargs != 0]
print(json.dumps(out))
"""


def release_ref(info: dict) -> str:
    """The Megatron-LM commit (or tag) whose arguments.py a release runs (see the module docstring)."""
    source = info["megatron_core"]["source"]
    found = re.search(r"submodule at ([0-9a-f]{40})", source)
    if found:
        return found.group(1)
    major, minor = re.match(r"(\d+)\.(\d+)", info["megatron_core"]["version"]).groups()
    return f"core_v{major}.{minor}.0"


def options(git_dir: str, ref: str) -> dict[str, list]:
    """The parser options of Megatron-LM at `ref` (DUMP, in a fresh interpreter)."""
    data = subprocess.run(["git", "--git-dir", git_dir, "archive", ref, "megatron"], check=True,
                          capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tree:
        with tarfile.open(fileobj=BytesIO(data)) as tar:
            tar.extractall(tree, filter="data")
        done = subprocess.run([sys.executable, "-c", DUMP, tree], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


HYBRID_ALLOCATORS = ("megatron/core/models/hybrid/hybrid_layer_allocation.py",
                     "megatron/core/ssm/mamba_hybrid_layer_allocation.py")


def hybrid_symbols(git_dir: str, ref: str) -> list[str]:
    """The layer symbols Megatron-LM's hybrid allocator at `ref` takes: its class Symbols' VALID (VALID_LAYERS from
    megatron-core 0.17) set, each name read from the same class."""
    for path in HYBRID_ALLOCATORS:
        done = subprocess.run(["git", "--git-dir", git_dir, "show", f"{ref}:{path}"], capture_output=True, text=True)
        if done.returncode == 0:
            break
    else:
        raise SystemExit(f"{ref}: no hybrid layer allocator at {' or '.join(HYBRID_ALLOCATORS)}")
    body = re.search(r"^class Symbols\b.*?(?=^\S)", done.stdout, re.S | re.M).group(0)
    names = dict(re.findall(r"^\s+([A-Z_]+)\s*=\s*['\"](.)['\"]", body, re.M))
    valid = re.search(r"^\s+VALID(?:_LAYERS)?\s*=\s*\{([^}]*)\}", body, re.M).group(1)
    return sorted(names[n.strip()] for n in valid.split(",") if n.strip())


def main(git_dir: str) -> None:
    releases = json.loads((ROOT / "commbench/data/recipes.json").read_text())["releases"]
    target = options(git_dir, TARGET)
    out = {"about": __doc__.split("\n\n")[0].strip() + " Generated by tools/megatron_release_flags.py (its "
                    "docstring gives the sources). Per release: ref (the Megatron-LM commit or tag read), lacks "
                    "(core_v0.16.1 options the release's parse_args has not), differs (options whose "
                    "[nargs, choices, takes_value] differ: the release's own), hybrid_symbols (the layer symbols its "
                    "hybrid allocator takes in --hybrid-override-pattern).",
           "target": TARGET, "releases": {}}
    for release, info in sorted(releases.items()):
        ref = release_ref(info)
        got = target if ref == TARGET else options(git_dir, ref)
        out["releases"][release] = {
            "ref": ref, "megatron_core": info["megatron_core"]["version"],
            "lacks": sorted(set(target) - set(got)),
            "differs": {k: got[k] for k in sorted(set(target) & set(got)) if got[k] != target[k]},
            "hybrid_symbols": hybrid_symbols(git_dir, ref)}
        print(release, ref, len(got), file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
