"""Reference facts shipped with the package (hardware.toml, models.toml, calibration-runs.json,
FLOPS.md) and their loader (reference.py)."""
