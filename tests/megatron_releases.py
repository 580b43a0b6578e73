"""Each recipe-table release's own Megatron-LM tree, read offline from a git directory of github.com/NVIDIA/Megatron-LM
named by MEGATRON_LM_GIT (a clone or mirror with the core_v* tags and the commits the releases' Megatron-Bridge
submodules pin); the tests that need it skip with that reason otherwise. A release's tree is the commit
commbench/data/recipes.json names in its megatron_core source (the tag of its megatron-core range's lower bound,
core_v<MAJOR.MINOR>.0, where it pins no submodule: 25.09), `git archive`d once per session; its parse_args ->
validate_args -> core_transformer_config_from_args run in a fresh interpreter with its own megatron.core
(tests/megatron_release_run.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from functools import lru_cache
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent


def git_dir() -> str | None:
    path = os.environ.get("MEGATRON_LM_GIT")
    return path if path and Path(path).exists() else None


SKIP_REASON = ("MEGATRON_LM_GIT does not name a git directory of github.com/NVIDIA/Megatron-LM (a clone or mirror "
               "with the core_v* tags and the releases' submodule commits)")


def release_ref(release: str) -> str:
    """The Megatron-LM commit (or tag) a table release runs (see the module docstring)."""
    from commbench.planner.layout.recipes import recipes_json_releases
    core = recipes_json_releases()[release]["megatron_core"]
    found = re.search(r"submodule at ([0-9a-f]{40})", core["source"])
    if found:
        return found.group(1)
    major, minor = re.match(r"(\d+)\.(\d+)", core["version"]).groups()
    return f"core_v{major}.{minor}.0"


@lru_cache(maxsize=None)
def release_tree(ref: str, base: str) -> str:
    """megatron/ at `ref` under `base`/ref (extracted once)."""
    tree = Path(base) / ref
    if not (tree / "megatron" / "training" / "arguments.py").is_file():
        data = subprocess.run(["git", "--git-dir", git_dir(), "archive", ref, "megatron"], check=True,
                              capture_output=True).stdout
        tree.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=BytesIO(data)) as tar:
            tar.extractall(tree, filter="data")
    return str(tree)


def run_cases(tree: str, cases: list[dict]) -> list[dict]:
    """tests/megatron_release_run.py over `cases` in `tree`: per case {"ok": ...} (see there)."""
    done = subprocess.run([sys.executable, str(HERE / "megatron_release_run.py"), tree], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
