"""Every benchmark script runs as the README writes it, `python benchmarks/NAME.py`, from the repository root.
gloo_reduce_scatter.py (README: the source of "20-80 ms per 512 KiB reduce_scatter instead of 2 ms") imported
tests.distributed, which an installed commbench does not have: "No module named 'tests'" (probe AX finding 3)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def test_the_scripts_are_found():
    assert "gloo_reduce_scatter.py" in SCRIPTS and "newer_releases.py" in SCRIPTS and len(SCRIPTS) >= 14


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_no_benchmark_imports_the_test_suite(path):
    """tests/ is not installed (pyproject packages: commbench*, collectives*): a benchmark that imports it runs only
    where the checkout happens to be on sys.path."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        assert not [n for n in names if n == "tests" or n.startswith("tests.")], (path.name, node.lineno)


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_benchmark_answers_help_from_the_repo_root(script):
    """`python benchmarks/NAME.py --help` as written (the checkout on PYTHONPATH stands in for `pip install -e .`):
    argparse's usage and exit 0, before any work."""
    done = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stdout + done.stderr
