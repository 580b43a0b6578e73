import os

import pytest

# The suite runs as CI runs it, with no terminal width from outside: a test that wants one sets COLUMNS itself.
# pytest imports readline at start-up, and GNU readline exports COLUMNS=80 LINES=24 into the C environment: forked and
# spawned children saw them, and so did every pytest-xdist worker, in os.environ (its tables came out 80 wide, not
# the piped width, and 8 tests failed there only).
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
    os.unsetenv(_name)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    # Under pytest-xdist (--dist loadgroup) the netns tests run one after another on one worker: each builds an
    # emulated fabric of rate-limited links and times it, and two fabrics at once on a 2-core host would time each
    # other's CPU load.
    netns = pytest.mark.xdist_group("netns")
    for item in items:
        if item.get_closest_marker("netns"):
            item.add_marker(netns)
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


SMALL_PLAN = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4", "--gbs", "64", "--emit", "json"]


@pytest.fixture(scope="module")
def small_plan(tmp_path_factory):
    """plan.json of a small pinned MoE layout (TP2 EP2 ETP1 on 4 B200): what verify-plan's tests run and edit."""
    from typer.testing import CliRunner

    from commbench.cli.app import app
    folder = tmp_path_factory.mktemp("plan")
    result = CliRunner().invoke(app, SMALL_PLAN + ["--layout", "tp=2,pp=1,ep=2,etp=1,cp=1", "--out", str(folder)])
    assert result.exit_code == 0, result.output
    return folder / "plan.json"


@pytest.fixture(scope="module")
def search_once():
    """Each distinct plan search made once for the module's tests: for the tests that run the same `plan`/`tune`
    command again and again (at every terminal width, before and after --force) and check what it prints or writes,
    not the search. The same request gives the same layouts; a request that differs in anything (its repr) is
    searched anew. Returns the searches made (repr of the request -> result)."""
    from commbench.cli import search_view
    from commbench.planner.search import space

    real, done = space.search, {}

    def search(req):
        key = repr(req)
        if key not in done:
            done[key] = real(req)
        return done[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(space, "search", search)   # read at call time by plan.py and recipe_gap.py
        patch.setattr(search_view, "search", search)
        yield done
