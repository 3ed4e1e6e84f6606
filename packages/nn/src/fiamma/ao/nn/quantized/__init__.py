"""``fiamma.ao.nn.quantized`` (``torch.ao.nn.quantized``, also ``fiamma.nn.quantized``):
``FloatFunctional`` (float modules' tensor ops, observable) and the int8 modules ``convert``
swaps in (``Quantize``, ``DeQuantize``, ``Conv1d``, ``Conv2d``, ``Conv3d``, ``Linear``,
``QFunctional``, ``ReLU6``, ``Hardswish``, ``Dropout``; see :mod:`fiamma.ao.nn.quantized.modules`
and :mod:`fiamma.ao.nn.quantized.conv`) the weight-only quantized ``Embedding`` and
``EmbeddingBag`` (:mod:`fiamma.ao.nn.quantized.embedding_ops`), and the dynamic quantized
modules of :mod:`fiamma.ao.nn.quantized.dynamic`. Other int8 modules of PyTorch
(``LayerNorm``, ``ConvTranspose2d``, ...) raise AttributeError by name.

    >>> import fiamma
    >>> from fiamma.ao.nn.quantized import FloatFunctional
    >>> f = FloatFunctional()
    >>> f.add_relu(fiamma.tensor([1.0, -3.0]), fiamma.tensor([1.0, 1.0]))
    tensor([2., 0.])
"""
import fiamma
from fiamma import nn

__all__ = ["FloatFunctional", "Quantize", "DeQuantize", "Conv1d", "Conv2d", "Conv3d", "Linear",
           "QFunctional", "ReLU6", "Hardswish", "Dropout", "Embedding", "EmbeddingBag",
           "functional", "modules", "conv", "embedding_ops", "dynamic"]


class FloatFunctional(nn.Module):
    """Tensor operations as a module, so that eager-mode quantization can observe their
    outputs (``activation_post_process``, an ``nn.Identity`` in float). Call the methods;
    ``forward`` is not meant to be used."""

    def __init__(self):
        super().__init__()
        self.activation_post_process = nn.Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use "
                           "the underlying operation (add, mul, cat, add_relu, ...)")

    def add(self, x, y):
        """``x + y``."""
        return self.activation_post_process(fiamma.add(x, y))

    def add_scalar(self, x, y):
        """``x + y`` for a Python number ``y`` (not observed, as in PyTorch)."""
        return fiamma.add(x, y)

    def mul(self, x, y):
        """``x * y``."""
        return self.activation_post_process(fiamma.mul(x, y))

    def mul_scalar(self, x, y):
        """``x * y`` for a Python number ``y`` (not observed, as in PyTorch)."""
        return fiamma.mul(x, y)

    def cat(self, x, dim=0):
        """``fiamma.cat(x, dim)``."""
        return self.activation_post_process(fiamma.cat(x, dim=dim))

    def add_relu(self, x, y):
        """``relu(x + y)``."""
        return self.activation_post_process(fiamma.relu(fiamma.add(x, y)))

    def matmul(self, x, y):
        """``x @ y``."""
        return self.activation_post_process(fiamma.matmul(x, y))


from fiamma.ao.nn.quantized import (  # noqa: E402
    conv,
    dynamic,
    embedding_ops,
    functional,
    modules,
)
from fiamma.ao.nn.quantized.conv import Conv1d, Conv3d  # noqa: E402
from fiamma.ao.nn.quantized.embedding_ops import Embedding, EmbeddingBag  # noqa: E402
from fiamma.ao.nn.quantized.modules import (  # noqa: E402
    Conv2d,
    DeQuantize,
    Dropout,
    Hardswish,
    Linear,
    QFunctional,
    Quantize,
    ReLU6,
)


def __getattr__(name):
    from fiamma.ao._absent import absent
    absent(__name__, name, __all__)
