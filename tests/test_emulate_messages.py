"""Bad-input and label details found from outside (probe AM F8): a --netns-prefix starting with '-' was refused with
'letters, digits and '-', at most 20 characters', which it satisfies (the rule is that it starts with a letter or
digit); a report's busbw plot over 1, 2 and 4 MiB left its 2 MiB tick without a label."""

from __future__ import annotations

import pytest

from commbench.emulate.fabric import FabricSpec
from commbench.errors import CommbenchError


def test_a_prefix_starting_with_a_dash_is_told_the_rule_it_breaks():
    with pytest.raises(CommbenchError) as caught:
        FabricSpec(num_racks=2, ranks_per_rack=1, scale_out_rate_bits_per_s=1e9, prefix="-amK")
    assert "start" in str(caught.value) and "--netns-prefix='-amK'" in str(caught.value), caught.value


def test_a_narrow_size_axis_labels_every_power_of_two():
    from commbench.results.plots import _pyplot, human_size_axis

    plt = _pyplot()
    fig, ax = plt.subplots()
    ax.set_xscale("log", base=2)
    ax.plot([1 << 20, 2 << 20, 4 << 20], [1, 2, 3])
    human_size_axis(ax.xaxis)
    fig.canvas.draw()
    shown = {t.get_text() for t in ax.xaxis.get_ticklabels()} | {t.get_text() for t in ax.xaxis.get_ticklabels(minor=True)}
    plt.close(fig)
    assert {"1 MiB", "2 MiB", "4 MiB"} <= shown, shown
    fig, ax = plt.subplots()   # a wide one keeps labels at powers of 4 only (no crowding)
    ax.set_xscale("log", base=2)
    ax.plot([8, 1 << 30], [1, 2])
    human_size_axis(ax.xaxis)
    fig.canvas.draw()
    minor = [t.get_text() for t in ax.xaxis.get_ticklabels(minor=True) if t.get_text()]
    plt.close(fig)
    assert not minor, minor
