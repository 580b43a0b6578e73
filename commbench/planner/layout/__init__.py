"""Stage 2: how it is laid out. The parallel layout and its validity rules (spec.py), Megatron's
pipeline layer split (split.py), rank placement over NVLink domains (placement.py). Imports models only."""
