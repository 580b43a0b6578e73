"""`nccl-tuner --channels 0` was refused ("from 1 to 64"), though --help called 0 the default ("default 0: NCCL's
own count") and the rules say 0 without --channels (probe CQ F4). 0 is now what the help says: NCCL's own count,
the same file as without --channels; --for example-plugin, which needs a count in every rule, refuses it as it
refuses no --channels, naming both."""

from __future__ import annotations

from tests.results_files import invoke as _invoke


def test_channels_zero_is_nccls_own_count_as_without_the_option(tmp_path):
    base = ["nccl-tuner", "--system", "h100-hgx", "--gpus", "12"]
    zero = _invoke(*base, "--channels", "0", "-O", str(tmp_path / "zero.conf"))
    assert zero.exit_code == 0, zero.output
    assert _invoke(*base, "-O", str(tmp_path / "none.conf")).exit_code == 0
    assert (tmp_path / "zero.conf").read_text() == (tmp_path / "none.conf").read_text()
    for bad in ("-1", "65"):
        refused = _invoke(*base, "--channels", bad, "-O", str(tmp_path / "bad.conf"))
        said = " ".join(refused.output.split())
        assert refused.exit_code == 2 and f"--channels={bad} is invalid: from 0 to 64" in said, said
    example = _invoke(*base, "--channels", "0", "--for", "example-plugin", "-O", str(tmp_path / "ex.conf"))
    said = " ".join(example.output.split())
    assert example.exit_code == 2 and "--for example-plugin needs a channel count" in said, said
    assert "--channels 0" in said and "from 1 to 64" in said and "Traceback" not in said, said
