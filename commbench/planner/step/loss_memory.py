"""Which cross-entropy implementation a run's loss stage runs, and the bytes per logit it holds: one rule for the
step model's memory (step/memory.py logits_bytes), the search's fit, pinned plans, tune and verify-plan.

Bytes per logit (one vocabulary row of one token, at the rows the framework builds) are what the loss keeps for its
backward, as every activation term of step/memory.py is what a layer saves for backward:
- "te": Transformer Engine's fused cross entropy (megatron-core cross_entropy_fusion_impl="te": language_module.py
  compute_language_model_loss -> extensions/transformer_engine.py te_parallel_cross_entropy, core_v0.16.1) writes
  the logits' gradient in place into the bf16 logits during forward: 2 B, no fp32 copy. Every Megatron-Bridge
  performance recipe sets it (scripts/performance/utils/overrides.py at v0.3.0, helpers.py at v0.2.0, the 25.09
  YAMLs), so the published runs the step model is calibrated on ran it.
- "native": megatron-core's own fused cross entropy (cross_entropy_fusion_impl="native", what the emitted Megatron-LM
  launch runs where its release's validate_args refuses "te": core_v0.18.2 on, 26.06.01 and later: launch_loss).
  core_v0.16.1 fusions/fused_cross_entropy.py: calculate_logits_max casts the logits to fp32 (tensor_parallel/
  cross_entropy.py calculate_logits_max: .float()), calculate_predicted_logits and calculate_cross_entropy_loss turn
  that copy into the softmax in place, and forward saves it for backward (fused_cross_entropy.py:119
  ctx.save_for_backward(exp_logits, ...)): 4 B. (In its forward the bf16 logits sit beside the fp32 copy, and in its
  backward the bf16 gradient beside the fp32 one, fused_cross_entropy.py:82: 6 B at those moments; like every
  transient, that is the reserve's.)
- "torchtitan": TorchTitan 0.3.0's cross_entropy_loss (components/loss.py:32-65) passes pred.flatten(0, 1).float()
  to F.cross_entropy (one TP rank) or to _LossParallelCrossEntropy (vocabulary-parallel, loss.py:52-58, which saves
  its fp32 log-probabilities: loss.py:183 ctx.save_for_backward(log_probs, labels_1d)); eagerly F.cross_entropy saves
  log_softmax's fp32 result. The charge is 8 B, the fp32 copy and the fp32 log-probabilities of the forward, as
  before this rule: what is saved for backward is less (4 B eager or vocabulary-parallel; 2 B, the bf16 pred, where
  torch.compile compiles the one-rank loss, as the emitted launch does: emit/torchtitan.py TITAN_COMPILE), so this
  over-charges TorchTitan plans rather than under-charge them.

Which one a run holds: launch_loss (what commbench's emitted launch runs: plans, searched and pinned, tune, verify-plan;
for Megatron-LM the recipes' te where the release's Megatron-LM takes it, else native: megatron_launch_loss)
or RUN_LOSS (what a published run or a Megatron-Bridge recipe ran: calibration, benchmarks/vendor_layouts.py,
benchmarks/memory_fit.py, the recipe's layout beside a plan). A search reads it from its one switch,
SearchRequest.target (TARGETS: "launch" or "published"; target_loss), which also says whether the search leaves out
what the release's Megatron-LM takes in no spelling (layout/release_flags.py: the launch only).
"""

from __future__ import annotations

from commbench.errors import invalid

LOSS_LOGIT_BYTES = {"te": 2.0, "native": 4.0, "torchtitan": 8.0}

# per framework (search/frameworks.py FRAMEWORKS): the loss the emitted launch runs with no release named (Megatron-LM:
# native, the one every table release's validate_args takes), and the one a published run or a Megatron-Bridge recipe of
# that framework ran
LAUNCH_LOSS = {"megatron": "native", "torchtitan": "torchtitan"}
RUN_LOSS = {"megatron": "te", "torchtitan": "torchtitan"}

# The first megatron-core whose validate_args refuses --cross-entropy-fusion-impl te: 0.18.2 (release 26.06.01's
# Megatron-LM 458c8d0 arguments.py:1529-1532, from 168cb15d70 "Disable TE cross entropy loss fusion (#5115)"). The
# older trees take it: core_v0.14.0 arguments.py:1957-1959 (25.09: choices native, te), 0d8e0714 arguments.py:2253
# (25.11), and 26.06's d0b3b77 has no such check; language_module.py runs te_parallel_cross_entropy for it.
TE_LOSS_REFUSED_CORE = (0, 18, 2)


def megatron_launch_loss(release: str | None) -> str:
    """The cross entropy commbench's Megatron-LM launch for a table release runs: the recipes' (RUN_LOSS: te, what every
    Megatron-Bridge performance recipe sets) where the release's Megatron-LM takes it (megatron-core older than
    TE_LOSS_REFUSED_CORE), else native; with no release, native (LAUNCH_LOSS)."""
    if release is None:
        return LAUNCH_LOSS["megatron"]
    from commbench.planner.layout.release_flags import release_core_at_least
    return "native" if release_core_at_least(release, TE_LOSS_REFUSED_CORE) else RUN_LOSS["megatron"]

# the loss implementations a framework's runs can hold
FRAMEWORK_LOSSES = {"megatron": ("native", "te"), "torchtitan": ("torchtitan",)}


# what a search plans (SearchRequest.target): the launch commbench emits, or a published run / Megatron-Bridge recipe
TARGETS = ("launch", "published")


def launch_loss(framework: str, release: str | None = None) -> str:
    """The cross entropy commbench's emitted launch of `framework` for `release` (a table release; None: none named)
    runs (a plan's memory charges it): megatron_launch_loss for Megatron-LM."""
    return megatron_launch_loss(release) if framework == "megatron" else LAUNCH_LOSS[framework]


def run_loss(framework: str) -> str:
    """The cross entropy a published run (or a Megatron-Bridge recipe) of `framework` ran."""
    return RUN_LOSS[framework]


def target_loss(framework: str, target: str, release: str | None = None) -> str:
    """The cross entropy a search planning `target` (TARGETS) of `framework` at `release` charges: launch_loss or
    run_loss."""
    return launch_loss(framework, release) if target == "launch" else run_loss(framework)


def check_loss(loss: str | None, framework: str) -> str:
    """`loss` (None: the emitted launch's) when `framework` runs it; else one line naming both."""
    if loss is None:
        return launch_loss(framework)
    allowed = FRAMEWORK_LOSSES.get(framework, ())
    if loss not in allowed:
        raise invalid("loss", loss, f"a cross entropy framework {framework} runs: {', '.join(allowed) or 'none'}")
    return loss


def loss_description(loss: str) -> str:
    """plan.json's words for the loss charged."""
    return {"te": "Transformer Engine's fused cross entropy (2 B per logit: its gradient in place in the bf16 logits)",
            "native": "megatron-core's native fused cross entropy (4 B per logit: its fp32 softmax kept for backward)",
            "torchtitan": "TorchTitan's cross entropy on fp32 logits (8 B per logit: the fp32 copy and the fp32 "
                          "log-probabilities)"}[loss]
