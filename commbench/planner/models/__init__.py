"""Stage 1 of the planner: what is trained. Model descriptions (the zoo in data/models.toml, a
user's --model-file table), parameter counts and Megatron model FLOPs per token (spec.py)."""
