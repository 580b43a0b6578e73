"""MoE expert-parallel traffic: router models, byte accounting, payload layout, presets (pure numpy)."""
