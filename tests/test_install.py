"""commbench installs into the user's environment without replacing its torch (NGC containers,
cluster venvs), while the dev/CI install pins the CPU build of torch on this machine's disk."""

from __future__ import annotations

import email.parser
import pathlib
import subprocess
import sys
import venv

import pytest
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def requirements(tmp_path_factory) -> list[Requirement]:
    """Requires-Dist of the project's built metadata (setuptools' PEP 517 metadata hook)."""
    out = tmp_path_factory.mktemp("meta")
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    name = subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, check=True, capture_output=True,
                          text=True, timeout=120).stdout.strip().splitlines()[-1]
    metadata = email.parser.Parser().parsestr((out / name / "METADATA").read_text(encoding="utf-8"))
    return [Requirement(line) for line in metadata.get_all("Requires-Dist")]


def _torch(requirements, extra: str | None) -> list[Requirement]:
    found = []
    for req in requirements:
        if req.name != "torch":
            continue
        in_extra = req.marker is not None and "extra" in str(req.marker)
        if extra is None and not in_extra:
            found.append(req)
        elif extra is not None and in_extra and req.marker.evaluate({"extra": extra}):
            found.append(req)
    return found


def test_core_torch_requirement_is_a_lower_bound_only(requirements):
    core = _torch(requirements, None)
    assert len(core) == 1, core
    operators = {spec.operator for spec in core[0].specifier}
    assert operators and operators <= {">=", ">"}, f"core torch requirement must not cap or pin: {core[0]}"
    # NGC's and nightly torch versions satisfy it (pip accepts an installed pre-release)
    for version in ("2.8.0a0+5228986c39.nv25.05", "2.13.0+cpu", "2.14.1", "3.0.0"):
        assert core[0].specifier.contains(version, prereleases=True), version


def test_no_core_requirement_is_pinned_or_capped(requirements):
    for req in requirements:
        if req.marker is not None and "extra" in str(req.marker):
            continue
        assert all(spec.operator in (">=", ">") for spec in req.specifier), f"core requirement capped: {req}"


def test_dev_install_resolves_to_the_local_cpu_torch(requirements):
    dev = _torch(requirements, "dev")
    assert [str(req.specifier) for req in dev] == ["==2.13.0"]


@pytest.mark.timeout(300)
def test_editable_install_keeps_the_torch_already_installed(tmp_path):
    """A venv that sees the machine's torch (as an NGC container's system site-packages do):
    `pip install -e .` with no index must succeed and leave torch where and what it was."""
    import site

    import torch

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    python = str(env_dir / "bin" / "python")
    # The environment running this test (a fresh `python -m venv` or the base interpreter) is the
    # "system" the new venv sees: its site-packages go on the new venv's path through a .pth file.
    # (system_site_packages=True would show the *base* interpreter's, which inside a venv lacks torch.)
    inner = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                           capture_output=True, text=True).stdout.strip()
    outer = [p for p in dict.fromkeys([*site.getsitepackages(), str(pathlib.Path(torch.__file__).parents[1])])
             if pathlib.Path(p).is_dir()]
    (pathlib.Path(inner) / "outer-environment.pth").write_text("\n".join(outer) + "\n")
    probe = "import torch; print(torch.__version__); print(torch.__file__)"
    before = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert before == [torch.__version__, torch.__file__]
    # --no-index: pip can take nothing from any index, so any attempt to replace torch fails
    resolve = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-build-isolation", "-e", str(ROOT)],
                             capture_output=True, text=True, timeout=240)
    assert resolve.returncode == 0, resolve.stderr[-2000:]
    assert "torch" not in resolve.stdout.split("Successfully installed")[-1].split("\n")[0]
    after = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert after == before


def test_readme_cautious_install_names_every_core_requirement_but_torch(requirements):
    """The README's `pip install --no-deps -e . && pip install numpy rich typer` left out tomli, which
    commbench imports on Python 3.10 (requires-python >= 3.10): sweep, plan and tune then died in a traceback."""
    import shlex

    line = next(x for x in (ROOT / "README.md").read_text().splitlines() if x.startswith("pip install --no-deps -e ."))
    named = {Requirement(arg).name: Requirement(arg) for arg in shlex.split(line.split("&&")[1].split("#")[0])[2:]}
    core = [r for r in requirements if r.marker is None or "extra" not in str(r.marker)]
    assert {r.name for r in core} - {"torch"} == set(named), named
    for req in core:
        if req.name != "torch":
            assert str(req.marker) == str(named[req.name].marker), req  # tomli only where Python lacks tomllib


def test_a_missing_core_requirement_is_one_line_not_a_traceback(monkeypatch):
    """After the cautious --no-deps install into an environment without torch, `commbench env` (the command
    meant to say what is installed) ended in a ModuleNotFoundError traceback."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ModuleNotFoundError(name="torch")
    result = CliRunner().invoke(app, ["env"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "torch is not installed in this Python" in lines[0] and "torch>=2.3" in lines[0], lines


def test_a_requirement_missing_when_the_cli_loads_is_one_line_too():
    """tomli missing on Python 3.10 (or numpy anywhere) failed while the CLI's modules were imported, before any
    command's error handling: a traceback."""
    code = ("import sys; sys.modules['numpy'] = None; sys.argv = ['commbench', 'env']; "
            "from commbench.__main__ import main; main()")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: numpy is not installed in this Python"), lines
