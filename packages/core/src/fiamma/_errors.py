"""Exception types PyTorch exposes at the top level."""

__all__ = ["OutOfMemoryError"]


class OutOfMemoryError(RuntimeError, MemoryError):
    """A device allocation failed (``torch.OutOfMemoryError``, also
    ``torch.cuda.OutOfMemoryError``): fiamma's CUDA allocator raises it when CuPy cannot
    allocate. It is a RuntimeError, as PyTorch's, and a MemoryError, as the allocation
    failure it reports."""
