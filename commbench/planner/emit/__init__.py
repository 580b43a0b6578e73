"""Stage 5: what a user launches. Megatron-LM arguments and launch.env (megatron.py), TorchTitan
config (torchtitan.py), plan.json and the plan files (plan.py), a pinned layout's plan (pinned.py).
Imports every stage but calibrate."""
