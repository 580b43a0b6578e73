"""The rack placement a plan prices is said, with how to launch it (probe P9): 64 GPUs per NVL72 rack for counts
that are multiples of 64 and not of 72 (Megatron-Bridge v0.6.0 executors.py:168-176 --segment), partial racks, which
groups leave a rack, and why launch.env writes no NCCL_NVLS_ENABLE."""

from commbench.planner.emit.megatron import launch_env_text
from commbench.planner.emit.rack_placement import bridge_segment, groups_leaving_line, rack_fill_line
from commbench.planner.layout.placement import place
from commbench.planner.layout.spec import Layout


def test_64_per_rack_says_segment_and_the_ep_groups_a_plain_fill_would_split():
    # DeepSeek-V3 on 256 GB200: EP64 inside one rack at 64 per rack; 72-fill splits 3 of the 4 groups (64-127: 8 + 56)
    lay = Layout(tp=1, pp=2, vp=4, ep=64, etp=1, dp=128, mbs=1, gbs=4096)
    line = rack_fill_line(place(lay, 256, 72), 72)
    assert "64 of each 72-GPU" in line and "--segment=16" in line and "executors.py:168-176" in line
    assert "3 of 4 EP64 groups would cross" in line
    assert "inside one domain: EP64" in groups_leaving_line(place(lay, 256, 72), 72)


def test_partial_rack_is_said_and_bridge_segments_differ():
    lay = Layout(tp=1, pp=1, ep=4, etp=1, dp=100, mbs=1, gbs=400)
    line = rack_fill_line(place(lay, 100, 72), 72)
    assert "partial (28 of its 72 GPUs)" in line and "--segment=5" in line and "up to 60 per rack" in line
    assert bridge_segment(100) == 5 and bridge_segment(1024) == 16 and bridge_segment(64) == 16


def test_launch_env_names_the_groups_that_leave_and_why_no_nvls_variable():
    lay = Layout(tp=1, pp=3, vp=3, ep=32, etp=1, dp=96, mbs=1, gbs=4096)
    p = place(lay, 288, 72)
    text = launch_env_text({}, gpu_name="gb200", fabric_name="gb200-nvl72", domain_size=72,
                           placement_lines=[rack_fill_line(p, 72), groups_leaving_line(p, 72)])
    assert "EP32 (3 of 9 groups, up to 2 domains)" in text   # the groups split 8+24, 16+16, 24+8
    assert "NCCL_NVLS_ENABLE=0 is not written" in text and "deepseek_v3.py:162-188" in text
    assert "the placement puts groups across" not in text
    assert not [x for x in text.splitlines() if x and not x.startswith("#")]


def test_plan_files_and_terminal_say_the_placement(tmp_path):
    from typer.testing import CliRunner
    from commbench.cli.app import app
    res = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb200-nvl72", "--gpus", "256",
                                   "--layout", "tp=1,pp=2,vp=4,ep=64,etp=1,cp=1,mbs=1", "-O", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "--segment=16" in " ".join(res.output.split())
    env = (tmp_path / "launch.env").read_text()
    assert "# placement (priced): 64 of each 72-GPU" in env and "inside one domain: EP64" in env


def test_hybridep_groups_across_racks_say_what_the_launch_needs(tmp_path):
    # DeepEP asserts 'Inter-node communication is not supported' unless built with HYBRID_EP_MULTINODE=1 (Megatron-LM
    # core_v0.16.1's image is not), and Megatron-Bridge's perf scripts set NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN to
    # the EP size (and refuse EP > 72): an EP128 HybridEP plan on 256 GB300 said none of it (fix-F16's finding)
    from typer.testing import CliRunner
    from commbench.cli.app import app
    from commbench.planner.emit.rack_placement import hybridep_domains_line

    across = place(Layout(tp=1, pp=2, ep=128, etp=1, dp=128, mbs=1, gbs=4096, dispatcher="flex"), 256, 72)
    line = hybridep_domains_line(across, "flex", "hybridep")
    assert "2 of 2 EP groups" in line and "HYBRID_EP_MULTINODE=1" in line and "overrides.py:265-283" in line
    assert hybridep_domains_line(across, "alltoall", None) is None
    inside = place(Layout(tp=1, pp=4, ep=64, etp=1, dp=64, mbs=1, gbs=4096, dispatcher="flex"), 256, 72)
    assert hybridep_domains_line(inside, "flex", "hybridep") is None
    res = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
                                   "--layout", "tp=1,pp=2,ep=128,dispatcher=flex", "-O", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "HybridEP across NVLink domains" in " ".join(res.output.split())
    assert "# HybridEP across NVLink domains (2 of 2 EP groups)" in (tmp_path / "launch.env").read_text()
