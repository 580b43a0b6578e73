"""One-line errors say what is wrong in the user's own spelling (found from outside: --rack-ranks '0-1;1-3' said
''1-3' goes past the 4 ranks' though rank 1 was listed twice; a sweep entry's in_place = [false, true] said
'in_place=[False, True] is invalid: true or false', Python's spelling, not saying a list is not accepted)."""

from __future__ import annotations

import tomllib

import pytest

from commbench.comm.topology import parse_rack_list
from commbench.errors import CommbenchError
from commbench.sweep import parse_sweep


@pytest.mark.parametrize("racks, message", [
    ("0-1;1-3", "rank 1 is listed twice"), ("0,1;1", "rank 1 is listed twice"), ("0-3;0-3", "rank 0 is listed twice"),
    ("0-1;3", "rank 2 is in no rack"), ("0-1;2-4", "'2-4' goes past the 4 ranks")])
def test_rack_lists_name_the_rank_that_is_repeated_or_missing(racks, message):
    with pytest.raises(CommbenchError) as caught:
        parse_rack_list(racks, 4)
    assert message in str(caught.value) and "exactly once" in str(caught.value)
    assert parse_rack_list("0,2;1,3", 4).racks == ((0, 2), (1, 3))


@pytest.mark.parametrize("line, message", [
    ("in_place = [false, true]", "in_place=[false, true] is invalid: true or false (one value: a list is not accepted"),
    ("iters = [1, 2]", "iters=[1, 2] is invalid: an integer >= 1 (one value: a list is not accepted"),
    ("in_place = 1", "in_place=1 is invalid: true or false"),
    ("iters = true", "iters=true is invalid: an integer >= 1")])
def test_sweep_values_are_spelled_as_toml(line, message):
    text = f'[sweep]\nname = "s"\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n{line}\n'
    with pytest.raises(CommbenchError) as caught:
        parse_sweep(tomllib.loads(text), "s.toml")
    assert message in str(caught.value)


@pytest.mark.parametrize("option, value, message", [
    ("--racks", "0-3;4-9", "'4-9' goes past the 4 ranks"), ("--racks", "0-1;1-3", "rank 1 is listed twice"),
    ("--racks", "0-2", "rank 3 is in no rack"), ("--rack-ranks", "0-1;1-3", "rank 1 is listed twice")])
def test_a_bad_rank_list_names_the_option_typed(tmp_path, option, value, message):
    """`bench --racks '0-3;4-9'` (--racks' old rank-list spelling) said `--rack-ranks='0-3;4-9' is invalid`, an option
    the user did not type (probe P6, session 44)."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "4", "-b", "1K", "-e", "1K", option, value,
                                      "-O", str(tmp_path / "r.jsonl")], env={"COLUMNS": "400"})
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert errors[0].startswith(f"error: {option}={value!r} is invalid: {message}"), errors
    assert not (tmp_path / "r.jsonl").exists()
