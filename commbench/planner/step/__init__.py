"""Stage 3: what one training step costs (all predicted, vectorised over layouts). evaluate.py
assembles the step from compute kernels (kernels.py, gemm_shape.py), memory (memory.py), MoE
traffic (moe_comm.py, ep_traffic.py), data-parallel sync (dp_sync.py) and the fitted efficiency
terms (terms.py). Imports models and layout."""
