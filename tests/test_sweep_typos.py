"""Sweep files: a misspelt key is refused by name with the closest known key, and before what the typo
leaves missing (`sizs` is named, not "sizes required")."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.sweep import parse_sweep


def refused(data) -> str:
    with pytest.raises(CommbenchError) as info:
        parse_sweep(data, "t.toml")
    return str(info.value)


RUN = {"collective": "all_reduce", "sizes": ["1K"]}


@pytest.mark.parametrize(("data", "expected"), [
    ({"run": [{**RUN, "itres": 3}]}, "run[0] (all_reduce): itres=3 is invalid: unknown key (did you mean iters?)"),
    ({"run": [{"collective": "all_reduce", "sizs": ["1K"]}]},
     "run[0] (all_reduce): sizs=['1K'] is invalid: unknown key (did you mean sizes?)"),
    ({"run": [{"colective": "all_reduce", "sizes": ["1K"]}]},
     "run[0]: colective='all_reduce' is invalid: unknown key (did you mean collective?)"),
    ({"run": [{**RUN, "collective": "all_reduse"}]},
     "collective='all_reduse' is invalid: unknown collective (did you mean all_reduce?)"),
    ({"run": [{**RUN, "sizes": {"min": "1K", "max": "4K", "factr": 2}}]},
     "sizes.factr=2 is invalid: unknown key (did you mean sizes.factor?)"),
    ({"sweep": {"nporc": 2}, "run": [RUN]}, "[sweep]: nporc=2 is invalid: unknown key (did you mean nproc?)"),
    ({"defaults": {"sizs": ["1K"]}, "run": [{"collective": "all_reduce"}]},
     "[defaults]: sizs=['1K'] is invalid: no [[run]] entry takes it (did you mean sizes?)"),
    ({"defualts": {"iters": 2}, "run": [RUN]}, "unknown top-level key (did you mean defaults?)"),
    ({"run": [{"collective": "grad_reduce_scatter", "sizes": ["1K"], "algorithim": "flat"}]},
     "algorithim='flat' is invalid: unknown key (did you mean algorithm?)"),
])
def test_typo_is_named_with_the_closest_key(data, expected):
    assert expected in refused(data)


def test_a_key_cut_short_at_an_underscore_gets_the_key():
    """`tokens = [...]` (bench's --tokens) was refused with no hint: 'tokens' is too short beside tokens_per_rank for
    difflib's 0.6 ratio (0.57), so the README's 'did you mean' for misspelt keys missed it."""
    message = refused({"run": [{"collective": "moe_all_to_all", "tokens": [16, 32]}]})
    assert "tokens=[16, 32] is invalid: unknown key (did you mean tokens_per_rank?)" in message


def test_a_key_close_to_nothing_gets_no_guess():
    message = refused({"run": [{**RUN, "zzz": 1}]})
    assert "zzz=1 is invalid: unknown key; allowed keys:" in message and "did you mean" not in message


def test_sizes_that_alignment_moves_or_merges_are_stated_by_dry_run(tmp_path):
    """reduce_scatter sizes 4..64 B on 3 ranks plan 12, 24, 48 B (5 sizes, 3 points): said, never silent."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    path = tmp_path / "s.toml"
    path.write_text('[sweep]\nbackend = "gloo"\n[[run]]\ncollective = "reduce_scatter"\n'
                    'sizes = {min = "4", max = "64", factor = 2}\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n')
    result = CliRunner().invoke(app, ["sweep", str(path), "--dry-run", "--world-size", "3"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert ("note: run[0] (0:reduce_scatter) float32 on 3 ranks: 5 size(s) give 3 point(s), aligned as nccl-tests "
            "aligns them: 4 B -> 12 B, 8 B -> 12 B, 16 B -> 12 B, 32 B -> 24 B (+1 more)") in text
    assert "run[1]" not in text.split("note:", 1)[1]  # 1 KiB all_reduce is measured as given
    import json
    doc = json.loads(CliRunner().invoke(app, ["sweep", str(path), "--dry-run", "--world-size", "3", "--json"]).stdout)
    assert len(doc["size_notes"]) == 1 and [p["size_bytes"] for p in doc["points"]] == [12, 24, 48, 1024]


def test_the_dry_run_listing_tells_points_apart_by_op_placement_and_iterations():
    """Two entries differing only in op (or in-place, or iters) listed identical rows: the listing now says how
    each point is measured, in the table and in --json (what the run's records and the report keep apart)."""
    import json

    from commbench.cli.sweep import dry_run_document

    sweep = parse_sweep({"sweep": {"name": "ops", "backend": "gloo"},
                         "run": [RUN, {**RUN, "op": "max"}, {**RUN, "out_of_place": True, "iters": 7}]}, "t.toml")
    doc = dry_run_document(sweep, 2, "gloo")
    hows = [p["how"] for p in doc["points"]]
    # all_reduce is in-place unless out_of_place = true (as bench): the listing says the form the records will say
    assert hows == ["sum, in-place, iters 20", "max, in-place, iters 20", "sum, out-of-place, iters 7"]
    assert len(set(hows)) == len(hows)
    broadcast = parse_sweep({"sweep": {"name": "b", "backend": "gloo"},
                             "run": [{"collective": "broadcast", "sizes": ["1K"], "root": 1}]}, "t.toml")
    assert dry_run_document(broadcast, 2, "gloo")["points"][0]["how"].startswith("in-place, root 1")
    assert json.loads(json.dumps(doc))["points"][1]["how"].startswith("max")
