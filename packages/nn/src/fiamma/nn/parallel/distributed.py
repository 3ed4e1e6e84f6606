"""fiamma.nn.parallel.distributed: PyTorch's module path of ``DistributedDataParallel``
(the class lives in the ``fiamma-distributed`` distribution and is imported on first use)."""

__all__ = ["DistributedDataParallel"]  # noqa: F822  (module __getattr__)


def __getattr__(name):
    if name == "DistributedDataParallel":
        import fiamma.nn.parallel as parallel

        return parallel.DistributedDataParallel
    raise AttributeError(f"module 'fiamma.nn.parallel.distributed' has no attribute {name!r}")
