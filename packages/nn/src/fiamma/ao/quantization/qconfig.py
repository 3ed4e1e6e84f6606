"""``QConfig`` (``torch.ao.quantization.qconfig``): which observers a module's activation and
weight get, and the engines' defaults.

    >>> import fiamma.ao.quantization as tq
    >>> qc = tq.get_default_qconfig("x86")
    >>> type(qc.activation()).__name__, type(qc.weight()).__name__
    ('HistogramObserver', 'PerChannelMinMaxObserver')
"""
from collections import namedtuple

import fiamma
from fiamma import nn
from fiamma.ao.quantization.fake_quantize import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    default_embedding_fake_quant,
    default_embedding_fake_quant_4bit,
    default_fake_quant,
    default_fused_act_fake_quant,
    default_fused_per_channel_wt_fake_quant,
    default_fused_wt_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
)
from fiamma.ao.quantization.observer import (
    HistogramObserver,
    MovingAverageMinMaxObserver,
    NoopObserver,
    PlaceholderObserver,
    default_dynamic_quant_observer,
    default_float_qparams_observer,
    default_float_qparams_observer_4bit,
    default_observer,
    default_per_channel_weight_observer,
    default_placeholder_observer,
    default_weight_observer,
)

__all__ = ["QConfig", "default_qconfig", "default_per_channel_qconfig", "default_qat_qconfig",
           "default_qat_qconfig_v2", "float_qparams_weight_only_qconfig",
           "float_qparams_weight_only_qconfig_4bit", "default_embedding_qat_qconfig",
           "default_embedding_qat_qconfig_4bit",
           "get_default_qconfig", "get_default_qat_qconfig", "qconfig_equals",
           "default_dynamic_qconfig", "per_channel_dynamic_qconfig", "float16_dynamic_qconfig"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """A pair of observer factories (classes or ``Observer.with_args(...)``), called once per
    module that ``prepare`` instruments."""

    __slots__ = ()

    def __new__(cls, activation, weight):
        if isinstance(activation, nn.Module) or isinstance(weight, nn.Module):
            raise ValueError("QConfig received observer instance, please pass observer class "
                             "instead. Use MyObserver.with_args(x=1) to override arguments to "
                             "constructor if needed")
        return super().__new__(cls, activation, weight)


default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_per_channel_qconfig = QConfig(activation=default_observer,
                                      weight=default_per_channel_weight_observer)
default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)
default_qat_qconfig_v2 = QConfig(activation=default_fused_act_fake_quant,
                                 weight=default_fused_wt_fake_quant)
# embeddings: weight-only quantization with a float scale and zero point per row
float_qparams_weight_only_qconfig = QConfig(activation=default_placeholder_observer,
                                            weight=default_float_qparams_observer)
float_qparams_weight_only_qconfig_4bit = QConfig(activation=default_placeholder_observer,
                                                 weight=default_float_qparams_observer_4bit)
default_embedding_qat_qconfig = QConfig(activation=NoopObserver.with_args(dtype=fiamma.float32),
                                        weight=default_embedding_fake_quant)
default_embedding_qat_qconfig_4bit = QConfig(
    activation=NoopObserver.with_args(dtype=fiamma.float32),
    weight=default_embedding_fake_quant_4bit)

# dynamic quantization (quantize_dynamic): the activation observer only carries the dtype
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                  weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float16_dynamic_qconfig = QConfig(
    activation=PlaceholderObserver.with_args(dtype=fiamma.float16, is_dynamic=True),
    weight=PlaceholderObserver.with_args(dtype=fiamma.float16))

_ENGINES = ("x86", "fbgemm", "qnnpack", "onednn")


def _check_backend(fn, backend):
    if backend not in _ENGINES:
        raise AssertionError(f"{fn}: backend {backend!r} not supported; expected one of "
                             f"{list(_ENGINES)}")


def get_default_qconfig(backend="x86", version=0):
    """PyTorch's post-training default for ``backend``: x86/fbgemm: 7-bit histogram-observed
    activations (``reduce_range``) and per-channel symmetric int8 weights; qnnpack: 8-bit
    histogram activations and per-tensor symmetric weights; onednn: 8-bit activations and
    per-channel weights."""
    _check_backend("get_default_qconfig", backend)
    if version != 0:
        raise AssertionError(f"get_default_qconfig: version {version} is not supported "
                             "(only 0)")
    if backend in ("x86", "fbgemm"):
        return QConfig(activation=HistogramObserver.with_args(reduce_range=True),
                       weight=default_per_channel_weight_observer)
    if backend == "qnnpack":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                       weight=default_weight_observer)
    return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                   weight=default_per_channel_weight_observer)


def get_default_qat_qconfig(backend="x86", version=1):
    """PyTorch's quantization-aware-training default for ``backend``: 8-bit activations
    (7-bit, ``reduce_range``, for x86/fbgemm) and int8 symmetric weights, per channel except
    for qnnpack. ``version=1`` (the default) uses :class:`FusedMovingAvgObsFakeQuantize`,
    ``version=0`` :class:`FakeQuantize`, both with moving-average min/max observers.

    >>> import fiamma.ao.quantization as tq
    >>> type(tq.get_default_qat_qconfig("qnnpack").activation()).__name__
    'FusedMovingAvgObsFakeQuantize'
    """
    _check_backend("get_default_qat_qconfig", backend)
    if version not in (0, 1):
        raise AssertionError(f"get_default_qat_qconfig: version {version} is not supported "
                             "(0 or 1)")
    reduce = backend in ("x86", "fbgemm")
    per_channel = backend != "qnnpack"
    fq = FakeQuantize if version == 0 else FusedMovingAvgObsFakeQuantize
    act = fq.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                       reduce_range=reduce)
    if version == 0:
        weight = (default_per_channel_weight_fake_quant if per_channel
                  else default_weight_fake_quant)
    else:
        weight = (default_fused_per_channel_wt_fake_quant if per_channel
                  else default_fused_wt_fake_quant)
    return QConfig(activation=act, weight=weight)


def qconfig_equals(q1, q2):
    """Whether two qconfigs make the same observers (compares factories' arguments)."""
    if q1 is None or q2 is None:
        return q1 is q2

    def same(a, b):
        pa, pb = getattr(a, "p", a), getattr(b, "p", b)
        if hasattr(pa, "func") and hasattr(pb, "func"):
            return pa.func == pb.func and pa.keywords == pb.keywords
        return pa == pb
    return same(q1.activation, q2.activation) and same(q1.weight, q2.weight)
