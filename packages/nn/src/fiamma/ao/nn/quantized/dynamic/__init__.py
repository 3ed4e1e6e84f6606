"""``fiamma.ao.nn.quantized.dynamic`` (``torch.ao.nn.quantized.dynamic``, also
``fiamma.nn.quantized.dynamic``): the modules ``quantize_dynamic`` swaps in. They take and
return float tensors, keep int8 (or float16) weights and quantize each input with its own
range: ``Linear`` (:mod:`.linear`), ``LSTM``, ``GRU``, ``RNNCell``, ``LSTMCell``, ``GRUCell``
(:mod:`.rnn`). The dynamic quantized convolutions of PyTorch are not built.

    >>> import fiamma
    >>> from fiamma import nn
    >>> import fiamma.ao.quantization as tq
    >>> m = tq.quantize_dynamic(nn.Sequential(nn.Linear(4, 4)), {nn.Linear})
    >>> m[0].extra_repr()
    'in_features=4, out_features=4, dtype=fiamma.qint8, qscheme=fiamma.per_tensor_affine'
"""
from fiamma.ao.nn.quantized.dynamic import linear, rnn  # noqa: F401
from fiamma.ao.nn.quantized.dynamic.linear import Linear
from fiamma.ao.nn.quantized.dynamic.rnn import GRU, LSTM, GRUCell, LSTMCell, RNNCell

__all__ = ["Linear", "LSTM", "GRU", "LSTMCell", "GRUCell", "RNNCell"]


def __getattr__(name):
    if name in ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                "ConvTranspose3d"):
        raise AttributeError(f"fiamma.ao.nn.quantized.dynamic.{name} is not available in "
                             "fiamma: the dynamic quantized convolutions are not built (what "
                             "exists: " + ", ".join(__all__) + ")")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
