"""nccl-tests imports cannot become tuner rules (an import records no combination: a run forced through NCCL_ALGO /
NCCL_PROTO is left out as forced by its environment); the note said only "measure with --nccl-algo" (probe P2: a
-J file of NCCL's default and two of Ring/LL128 and Ring/Simple at 16 channels gave 0 rules unexplained)."""

from __future__ import annotations

import json

from tests.nccl_tests_inputs import json_file
from tests.results_files import invoke


def test_the_note_says_nccl_tests_imports_cannot_become_rules(tmp_path):
    files = []
    for name, env, scale in (("default", [], 1.0), ("ring_ll128", ["NCCL_ALGO=Ring", "NCCL_PROTO=LL128"], 0.7)):
        doc = json.loads(json_file())
        doc["env"] = env
        for row in doc["results"]:
            for key in ("out_of_place", "in_place"):
                row[key]["time"] *= scale
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        files.append(str(path))
    results = str(tmp_path / "imported.jsonl")
    assert invoke("import", "nccl-tests", *files, "-O", results).exit_code == 0
    tuned = invoke("nccl-tuner", results, "--statistic", "nccl-avg", "-O", str(tmp_path / "t.conf"))
    said = " ".join(tuned.output.split())
    assert tuned.exit_code == 0 and "0 rule(s)" in said, said
    assert "nccl-tests imports cannot become rules: an import records no combination" in said, said
