"""Launching ranks and the communication backends (torch.distributed NCCL/gloo; CuPy raw NCCL)."""
