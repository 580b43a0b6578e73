"""compare judged a NEW measured over fewer iterations than BASE as if it had measured what BASE did: `iters` is no
part of a point's identity, and nothing said so (probe P2: nccl-tests logs -n 20 vs -n 1 and -n 5, commbench records
100 vs 10 under --statistic median and 100 vs 20 under auto: all exit 0). Now refused in one line naming both counts
and --allow-fewer-iters, which judges it as before and names the points; more iterations in NEW are fine."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from commbench.errors import CommbenchError
from commbench.results.compare import compare
from tests.nccl_tests_inputs import ROWS, text_log
from tests.results_files import invoke
from tests.test_compare import record, write
from tests.test_json_output import schema

SIZES = [1024 * 4 ** i for i in range(5)]


def _run(rng, run_id: str, iters: int, factor: float = 1.0) -> list:
    return [record(size, (20 + size / 1e3) * factor * np.exp(np.abs(rng.normal(0, 0.03, iters))), run_id=run_id)
            for size in SIZES]


@pytest.mark.parametrize("statistic", ["auto", "median", "nccl-avg"])
def test_new_with_fewer_iterations_than_base_is_refused_naming_both_counts(statistic):
    rng = np.random.default_rng(3)
    base, fewer, more = _run(rng, "b", 100), _run(rng, "n", 20), _run(rng, "m", 400)
    with pytest.raises(CommbenchError, match=r"run 1/1 \(run n\) measured .* over 20 iteration\(s\) \(iters\) where "
                                             r"the base's records hold 100 .*--allow-fewer-iters"):
        compare(base, fewer, max_regression=0.1, statistic=statistic)
    allowed = compare(base, fewer, max_regression=0.1, statistic=statistic, allow_fewer_iters=True)
    assert len(allowed.fewer_iters) == len(SIZES) and "iters 20, base 100" in allowed.fewer_iters[0]
    assert compare(base, more, max_regression=0.1, statistic=statistic).fewer_iters == []   # more: fine


def test_a_later_run_of_new_with_fewer_iterations_is_refused_and_a_base_run_with_fewer_sets_the_bar():
    rng = np.random.default_rng(4)
    with pytest.raises(CommbenchError, match=r"run 2/2 \(run n2\) .* over 30 iteration.*hold 40"):
        compare(_run(rng, "b", 40), _run(rng, "n1", 40) + _run(rng, "n2", 30), max_regression=0.1)
    # BASE's runs measured with 40 and 100: a NEW of 40 measured as one of them did
    assert compare(_run(rng, "b1", 40) + _run(rng, "b2", 100), _run(rng, "n", 40), max_regression=0.1).fewer_iters == []


def test_nccl_tests_logs_with_fewer_iterations_are_refused_and_allowed_with_the_option(tmp_path):
    slower = tuple(row.replace("26.99", "27.31").replace("47.96", "48.50") for row in ROWS)
    paths = {}
    for name, iters, rows in (("base", 20, ROWS), ("n1", 1, slower), ("n50", 50, slower)):
        log = tmp_path / f"{name}.log"
        log.write_text(text_log(rows).replace(" iters: 20 ", f" iters: {iters} "))
        paths[name] = str(tmp_path / f"{name}.jsonl")
        assert invoke("import", "nccl-tests", str(log), "-O", paths[name]).exit_code == 0
    refused = invoke("compare", paths["base"], paths["n1"])
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "Traceback" not in said, said
    assert "over 1 iteration(s) (iters) where the base's records hold 20" in said and "--allow-fewer-iters" in said
    allowed = invoke("compare", paths["base"], paths["n1"], "--allow-fewer-iters")
    assert allowed.exit_code == 0 and "allowed (--allow-fewer-iters): 6 point run(s)" in allowed.output, allowed.output
    doc = json.loads(invoke("compare", paths["base"], paths["n1"], "--allow-fewer-iters", "--json").stdout)
    jsonschema.validate(doc, schema("compare"), cls=jsonschema.Draft202012Validator)
    assert len(doc["fewer_iters"]) == 6 and doc["fewer_iters"][0].endswith("iters 1, base 20")
    assert invoke("compare", paths["base"], paths["n50"]).exit_code == 0   # more iterations than BASE: judged
    help_text = " ".join(invoke("compare", "--help").output.split())
    assert "--allow-fewer-iters" in help_text
