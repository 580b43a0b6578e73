"""compare --json wrote verdict "not reached" (a point a run cut short never reached) which compare.schema.json did not
allow (probe Q finding 4). Every verdict the gate can write, found in its source, is in VERDICT_CODES, and every phrase
and code is in the schema's enums; a cut-short --json document validates."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from commbench.cli.compare import VERDICT_CODES
from commbench.results import compare, compare_judge
from tests.test_compare_cut_short_new import SIZES, _run
from tests.test_compare import write
from tests.test_compare_runs import run_cli
from tests.test_json_output import schema, validate

# _bad_verdict writes ("newly " if BASE had it good else "") + bad_reason (skipped is written as failed)
COMPOSED = {f"{prefix}{reason}" for prefix in ("", "newly ") for reason in ("failed", "wrong")}


def _written_verdicts() -> set[str]:
    """The verdict phrases the gate's source writes: string constants given as verdict=..., assigned to `verdict`
    (also `verdict, detail = "...", ...`), or a bad verdict's first element; plus the composed ones."""
    found = set(COMPOSED)
    for module in (compare, compare_judge):
        tree = ast.parse(Path(module.__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "verdict" and isinstance(node.value, ast.Constant):
                found.add(node.value.value)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == "verdict" and isinstance(node.value, ast.Constant):
                        found.add(node.value.value)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and target.elts and \
                            isinstance(target.elts[0], ast.Name) and target.elts[0].id == "verdict" and \
                            isinstance(node.value.elts[0], ast.Constant):
                        found.add(node.value.elts[0].value)
                    if isinstance(target, ast.Name) and target.id == "bad" and isinstance(node.value, ast.Tuple) and \
                            isinstance(node.value.elts[0], ast.Constant):
                        found.add(node.value.elts[0].value)
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and node.value.elts and \
                    isinstance(node.value.elts[0], ast.Constant) and node.value.elts[0].value == "missing":
                found.add("missing")
    return found


def _enum(name: str) -> set[str]:
    return set(schema("compare")["properties"]["points"]["items"]["properties"][name]["enum"])


def test_every_verdict_the_gate_writes_has_a_code_and_both_are_in_the_schema():
    written = _written_verdicts()
    # the scan sees every kind of verdict (a sanity check of the scan itself)
    assert {"ok", "faster", "slower (within noise)", "REGRESSED", "missing", "not reached", "not ok in base",
            "not comparable"} <= written, written
    assert written <= set(VERDICT_CODES), written - set(VERDICT_CODES)
    assert set(VERDICT_CODES) <= _enum("verdict"), set(VERDICT_CODES) - _enum("verdict")
    assert set(VERDICT_CODES.values()) <= _enum("verdict_code"), set(VERDICT_CODES.values()) - _enum("verdict_code")


def test_a_cut_short_comparison_document_validates(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", "all_reduce", SIZES, 1))
    new = write(tmp_path / "new.jsonl", _run("n", "all_reduce", SIZES[:2], 2))
    for extra in ((), ("--allow-cut-short",)):
        document = json.loads(run_cli(base, new, *extra, "--json").stdout)
        assert "not reached" in {p["verdict"] for p in document["points"]}
        validate(document, "compare")
