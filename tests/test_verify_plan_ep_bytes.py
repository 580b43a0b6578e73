"""verify-plan's --max-bytes guard for the EP all-to-all (probe Q 6): it charged every token top_k x expert width x
2 B (bf16, one copy per expert) while a flex plan in an 8-bit recipe is measured per destination rank in fp8 (combine
bf16), so a -e the measurement fits was refused and the default measured a fraction of the tokens that fit. The
guard now asks the workload's own accounting of the seeded routing (MoeAllToAll.largest_buffer_bytes)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app


@pytest.fixture(scope="module")
def flex_plan(tmp_path_factory):
    """A flex (per-rank dispatch), mxfp8 (fp8 dispatch) plan: qwen3-30b-a3b (hidden 2048, top-8 of 128) on 4 ranks."""
    folder = tmp_path_factory.mktemp("flexplan")
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4",
                                      "--gbs", "64", "--emit", "json", "--out", str(folder), "--layout",
                                      "tp=1,pp=1,ep=4,etp=1,cp=1,dispatcher=flex,precision=mxfp8"])
    assert result.exit_code == 0, result.output
    return folder / "plan.json"


def _largest_buffer(params: dict, tokens: int, ranks: int) -> int:
    """The largest dispatch / combine buffer `prepare` allocates, from the routed traffic it allocates them by."""
    from collectives import get_collective

    workload = get_collective("moe_all_to_all")
    spec = workload.plan_specs(dict(params) | {"tokens_per_rank": [tokens]}, ranks)[0][0]
    traffic = workload._routed(spec, ranks)[6]
    sent, received = traffic.rows.sum(axis=1).max(), traffic.rows.sum(axis=0).max()
    return int(max(sent, received) * max(traffic.dispatch_row_bytes, traffic.combine_row_bytes))


def test_ep_tokens_are_the_most_whose_measured_buffers_fit(flex_plan):
    from commbench.planner.emit.plan import load_plan
    from commbench.workflows.verify import plan_items

    max_bytes = 64 << 10
    (ep,) = [i for i in plan_items(load_plan(flex_plan), 2, max_bytes)[0] if i.kind == "ep"]
    params = dict(ep.params)
    tokens = params.pop("tokens_per_rank")
    assert params["dispatch_mode"] == "per-rank" and params["dispatch_dtype"] == "fp8"
    # was 2: 65,536 // (8 x 2048 x 2 B); 2 ranks receive at most 2 rows per token, the combine's 4,096 B each
    assert tokens > 2, tokens
    assert _largest_buffer(params, tokens, 2) <= max_bytes < _largest_buffer(params, tokens + 1, 2)


def test_verify_plan_measures_a_max_bytes_the_old_guard_refused(flex_plan):
    """-e 16K: the old guard charged one token 32,768 B (8 x 2048 x 2) and refused; as measured, one token per rank
    fills at most 8,192 B here. Below what one token fills: refused in one line with the workload's bytes."""
    verify = ["verify-plan", str(flex_plan), "--nproc", "2", "--iters", "1"]
    result = CliRunner().invoke(app, [*verify, "-e", "16K"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "EP all-to-all: 32768 tokens per rank in the plan, measured with 2 " in result.output, result.output
    refused = CliRunner().invoke(app, [*verify, "-e", "4K"])
    assert refused.exit_code == 2, refused.output
    line = refused.output.strip()
    assert line.startswith("error: ") and "\n" not in line and "8,192-byte buffer" in line and "4,096" in line, line
