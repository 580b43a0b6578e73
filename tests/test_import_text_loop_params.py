"""nccl-tests text logs: `# Blocking Enabled: ...` (-z, the line after the banner) and the banner's `unalign: N` (-u)
were dropped, params {}, so compare matched a -z / -u run to an ordinary baseline and passed it (fit and nccl-tuner
mixed them too); the -J importer records -z as params.blocking. Both are params now, and the pair is refused."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import Measurement
from tests.nccl_tests_inputs import text_log

BLOCKING = "# Blocking Enabled: wait and barrier after each inner iteration (-m) "


def _params(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    return {repr(m.params) for m in import_file(str(tmp_path / name), "all_reduce").records if isinstance(m, Measurement)}


def test_blocking_and_unalign_are_params_and_compare_refuses_the_pair(tmp_path):
    assert _params(tmp_path, "plain.log", text_log()) == {"{}"}
    assert _params(tmp_path, "z.log", text_log(extra_banner_lines=(BLOCKING,))) == {"{'blocking': True}"}
    assert _params(tmp_path, "u.log", text_log(banner_tail="unalign: 1")) == {"{'unalign': 1}"}
    runner = CliRunner()
    for name in ("plain", "z"):
        assert runner.invoke(app, ["import", "nccl-tests", str(tmp_path / f"{name}.log"), "--collective", "all_reduce",
                                   "-O", str(tmp_path / f"{name}.jsonl")]).exit_code == 0
    refused = runner.invoke(app, ["compare", str(tmp_path / "plain.jsonl"), str(tmp_path / "z.jsonl")])
    assert refused.exit_code == 2 and "params {} vs {\"blocking\": true}" in refused.output, refused.output
