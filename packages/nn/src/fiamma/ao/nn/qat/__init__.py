"""``fiamma.ao.nn.qat`` (``torch.ao.nn.qat``, also ``fiamma.nn.qat``): the quantization-aware
training modules ``Conv1d``, ``Conv2d``, ``Conv3d`` and ``Linear`` (see
:mod:`fiamma.ao.nn.qat.modules`), ``Embedding`` and ``EmbeddingBag`` (see
:mod:`fiamma.ao.nn.qat.embedding_ops`).

    >>> import fiamma.ao.nn.qat as nnqat
    >>> import fiamma.ao.quantization as tq
    >>> nnqat.Conv2d(3, 8, 3, qconfig=tq.default_qat_qconfig).weight_fake_quant.dtype
    fiamma.qint8
"""
from fiamma.ao.nn.qat import embedding_ops, modules  # noqa: F401
from fiamma.ao.nn.qat.embedding_ops import Embedding, EmbeddingBag
from fiamma.ao.nn.qat.modules import Conv1d, Conv2d, Conv3d, Linear

__all__ = ["Conv1d", "Conv2d", "Conv3d", "Linear", "Embedding", "EmbeddingBag", "modules",
           "embedding_ops"]


def __getattr__(name):
    from fiamma.ao._absent import absent
    absent(__name__, name, __all__)
