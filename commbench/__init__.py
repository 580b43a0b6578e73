"""commbench: communication microbenchmarks, fabric cost models and layout autotuning for MoE training."""

__version__ = "0.1.0"
