"""Stage 3: what one training step costs (all predicted, vectorised over layouts). evaluate.py
assembles the step from compute kernels (kernels.py, gemm_shape.py), memory (memory.py), MoE
traffic (moe_comm.py, ep_traffic.py), data-parallel sync (dp_sync.py) and the fitted efficiency
terms (terms.py). Imports models and layout.

A change to this physics sets terms.STEP_MODEL (the day's date): calibration files record the step model their
terms were fitted to, and one fitted to another is warned about when read (tests/test_calibration_step_model.py
pins reference predictions to it)."""
