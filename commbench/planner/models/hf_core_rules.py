"""Where each release's megatron-core holds a rule an `hf:` refusal rests on, so that the refusal names the release the
plan is for (--software; the newest table release without it) and the file:line in that release's Megatron-LM.

Lines read from each release's Megatron-LM ref (layout/release_flags megatron_release_flags.json "ref": 25.09
core_v0.14.0, 25.11 0d8e0714, 26.02 b0cc2706, 26.02.01 55ac7082, 26.04 d7288711, 26.04.01 2edffadb, 26.06 d0b3b775,
26.06.01 458c8d0e, 26.08 cd4afffa) with `git show REF:PATH`; tests/test_hf_core_rules.py checks the table covers
every table release. A release the table lacks reads the newest one not newer (recipes.check_release does that first).
"""

from __future__ import annotations

from commbench.planner.models.release_data import core_version_key, release_core, stand_in_release

_TRANSFORMER_CONFIG = "megatron/core/transformer/transformer_config.py"
_MOE_UTILS = "megatron/core/transformer/moe/moe_utils.py"
_ARGUMENTS = "megatron/training/arguments.py"

# rule -> (file, what the line holds, {release: line})
CORE_RULES: dict[str, tuple[str, str, dict[str, int]]] = {
    # TransformerConfig.__post_init__: `if self.moe_router_enable_expert_bias and self.moe_router_score_function ...`
    # raising "Expert bias for aux-loss-free routing only supports sigmoid score function" (26.06 on: "'sigmoid' and
    # 'sqrtsoftplus'")
    "expert_bias": (_TRANSFORMER_CONFIG, "expert bias", {
        "25.09": 1200, "25.11": 1411, "26.02": 1593, "26.02.01": 1593, "26.04": 1822, "26.04.01": 1835,
        "26.06": 2060, "26.06.01": 2060, "26.08": 2284}),
    # group_limited_topk: `scores.view(num_tokens, num_groups, -1).topk(topk // group_topk, dim=-1)[0].sum(dim=-1)`
    "group_scores": (_MOE_UTILS, "group scores", {
        "25.09": 455, "25.11": 470, "26.02": 556, "26.02.01": 554, "26.04": 617, "26.04.01": 617,
        "26.06": 618, "26.06.01": 618, "26.08": 656}),
    # topk_routing_with_score_function, sigmoid branch: `probs = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20) if
    # topk > 1 else scores`
    "sigmoid_renorm": (_MOE_UTILS, "sigmoid top-k renormalised", {
        "25.09": 584, "25.11": 599, "26.02": 726, "26.02.01": 724, "26.04": 797, "26.04.01": 797,
        "26.06": 811, "26.06.01": 811, "26.08": 868}),
    # validate_args: `assert args.max_position_embeddings >= args.seq_length`
    "max_positions": (_ARGUMENTS, "max_position_embeddings >= seq_length", {
        "25.09": 770, "25.11": 882, "26.02": 830, "26.02.01": 830, "26.04": 1116, "26.04.01": 1121,
        "26.06": 1299, "26.06.01": 1299, "26.08": 1297}),
    # _add_network_size_args: `group.add_argument('--rotary-seq-len-interpolation-factor', type=int, default=None`
    "rotary_interpolation": (_ARGUMENTS, "--rotary-seq-len-interpolation-factor (type=int)", {
        "25.09": 1455, "25.11": 1647, "26.02": 1659, "26.02.01": 1659, "26.04": 2047, "26.04.01": 2060,
        "26.06": 2129, "26.06.01": 2136, "26.08": 2324}),
    # SelfAttention.__init__: the q_layernorm built with `hidden_size=self.hidden_size_per_attention_head` (one head)
    "qk_norm_per_head": ("megatron/core/transformer/attention.py", "q_layernorm of one head's width", {
        "25.09": 899, "25.11": 1000, "26.02": 1283, "26.02.01": 1283, "26.04": 1293, "26.04.01": 1293,
        "26.06": 1452, "26.06.01": 1452, "26.08": 1724}),
    # MambaMixer.__init__: `self.activation = "silu"`
    "mamba_silu": ("megatron/core/ssm/mamba_mixer.py", "MambaMixer activation", {
        "25.09": 290, "25.11": 290, "26.02": 314, "26.02.01": 314, "26.04": 319, "26.04.01": 319,
        "26.06": 327, "26.06.01": 327, "26.08": 367}),
    # MambaMixer.__init__ defaults: `bias=False,` then `conv_bias=True,` on the next line
    "mamba_bias": ("megatron/core/ssm/mamba_mixer.py", "MambaMixer bias=False, conv_bias=True", {
        "25.09": 141, "25.11": 141, "26.02": 161, "26.02.01": 161, "26.04": 171, "26.04.01": 171,
        "26.06": 173, "26.06.01": 173, "26.08": 189}),
    # TopKRouter.forward: `input = self.apply_input_jitter(input)` (the router's input alone)
    "input_jitter": ("megatron/core/transformer/moe/router.py", "router input jitter", {
        "25.09": 462, "25.11": 553, "26.02": 652, "26.02.01": 652, "26.04": 694, "26.04.01": 694,
        "26.06": 693, "26.06.01": 693, "26.08": 853}),
}
# the expert bias takes sqrtsoftplus scores as well from megatron-core 0.18.0 (26.06's d0b3b775
# transformer_config.py:2060)


def plan_release(release: str | None) -> str:
    """The table release a plan for `release` runs (None: the newest, as the plan's default)."""
    return stand_in_release(release)


def core_name(release: str | None) -> str:
    """'megatron-core 0.19.0 (release 26.08's Megatron-LM cd4afffa6484)'."""
    rel = plan_release(release)
    ref, version = release_core(rel)
    return f"megatron-core {version} (release {rel}'s Megatron-LM {ref if ref.startswith('core_v') else ref[:12]})"


def core_line(rule: str, release: str | None) -> str:
    """'megatron/core/transformer/transformer_config.py:2284': `rule`'s file:line at the plan's release."""
    path, _, lines = CORE_RULES[rule]
    return f"{path}:{lines[plan_release(release)]}"


def expert_bias_scores(release: str | None) -> str:
    """The score functions the release's expert bias takes."""
    version = release_core(plan_release(release))[1]
    return "sigmoid or sqrtsoftplus" if core_version_key(version) >= (0, 18, 0) else "sigmoid"
