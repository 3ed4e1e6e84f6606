"""fiamma.utils.tensorboard: ``SummaryWriter`` writing TensorBoard event files (PyTorch's
``torch.utils.tensorboard``) through the ``tensorboard`` package
(``pip install fiamma-core[tensorboard]``); see :class:`SummaryWriter`.
"""

try:
    import tensorboard  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fiamma.utils.tensorboard writes event files through the tensorboard package, which is "
        f"not installed ({e}): pip install tensorboard (or fiamma-core[tensorboard])",
        name="tensorboard") from None

from fiamma.utils.tensorboard.writer import SummaryWriter

__all__ = ["SummaryWriter"]
