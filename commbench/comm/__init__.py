"""Launching ranks and talking between them: launcher detection and local launch (torchrun, srun,
mpirun, or commbench's own local launcher), the backends (torch.distributed NCCL/gloo; CuPy raw NCCL) and the
topology the ranks run on (racks = scale-up domains)."""
