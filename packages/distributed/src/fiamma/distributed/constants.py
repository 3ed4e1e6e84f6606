"""fiamma.distributed.constants: PyTorch's ``torch.distributed.constants`` names."""

from fiamma.distributed._extras import default_pg_timeout  # noqa: F401

# PyTorch's name for the default of ``init_process_group(timeout=)`` on NCCL: the same here
default_pg_nccl_timeout = default_pg_timeout

__all__ = ["default_pg_timeout", "default_pg_nccl_timeout"]
