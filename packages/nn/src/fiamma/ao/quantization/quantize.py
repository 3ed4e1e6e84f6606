"""Eager-mode post-training quantization (``torch.ao.quantization.quantize``):
``prepare`` attaches observers, calibration runs the model, ``convert`` swaps the observed
float modules for int8 ones.

    >>> import fiamma
    >>> from fiamma import nn
    >>> import fiamma.ao.quantization as tq
    >>> m = nn.Sequential(tq.QuantStub(), nn.Conv2d(3, 4, 3), nn.ReLU(), tq.DeQuantStub()).eval()
    >>> m.qconfig = tq.get_default_qconfig("x86")
    >>> m = tq.fuse_modules(m, [["1", "2"]])
    >>> _ = tq.prepare(m, inplace=True)
    >>> _ = m(fiamma.randn(2, 3, 8, 8))
    >>> _ = tq.convert(m, inplace=True)
    >>> type(m[1]).__name__, m(fiamma.randn(1, 3, 8, 8)).shape
    ('ConvReLU2d', fiamma.Size([1, 4, 6, 6]))
"""
import copy
import itertools

from fiamma import nn
from fiamma.ao.nn import intrinsic as nni, qat as nnqat, quantized as nnq
from fiamma.ao.nn.intrinsic import qat as nniqat, quantized as nniq
from fiamma.ao.quantization.fake_quantize import (
    FakeQuantizeBase,
    default_fixed_qparams_range_0to1_fake_quant,
    default_fixed_qparams_range_neg1to1_fake_quant,
)
from fiamma.ao.quantization.observer import ObserverBase
from fiamma.ao.quantization.stubs import DeQuantStub, QuantStub, QuantWrapper
from fiamma.nn._qtensor import qint8 as _qint8
from fiamma.nn.utils.parametrize import type_before_parametrizations

__all__ = ["prepare", "convert", "quantize", "prepare_qat", "quantize_qat",
           "propagate_qconfig_", "add_quant_dequant", "swap_module",
           "get_default_static_quant_module_mappings", "get_default_qconfig_propagation_list",
           "get_default_qat_module_mappings", "get_embedding_qat_module_mappings",
           "get_embedding_static_quant_module_mappings", "quantize_dynamic",
           "get_default_dynamic_quant_module_mappings", "get_dynamic_quant_module_class",
           "get_static_quant_module_class"]


def get_default_static_quant_module_mappings():
    """Float module type -> int8 module type, for ``convert``."""
    return {
        QuantStub: nnq.Quantize,
        DeQuantStub: nnq.DeQuantize,
        nn.Conv1d: nnq.Conv1d,
        nn.Conv2d: nnq.Conv2d,
        nn.Conv3d: nnq.Conv3d,
        nn.Embedding: nnq.Embedding,
        nn.EmbeddingBag: nnq.EmbeddingBag,
        nn.Linear: nnq.Linear,
        nn.ReLU6: nnq.ReLU6,
        nn.Hardswish: nnq.Hardswish,
        nn.Dropout: nnq.Dropout,
        nni.ConvReLU1d: nniq.ConvReLU1d,
        nni.ConvReLU2d: nniq.ConvReLU2d,
        nni.ConvReLU3d: nniq.ConvReLU3d,
        nni.LinearReLU: nniq.LinearReLU,
        nnq.FloatFunctional: nnq.QFunctional,
        nnqat.Conv1d: nnq.Conv1d,  # not in PyTorch's table (its prepare_qat keeps Conv1d float)
        nnqat.Conv2d: nnq.Conv2d,
        nnqat.Conv3d: nnq.Conv3d,
        nnqat.Linear: nnq.Linear,
        nniqat.ConvBn1d: nnq.Conv1d,
        nniqat.ConvBn2d: nnq.Conv2d,
        nniqat.ConvBn3d: nnq.Conv3d,
        nniqat.ConvBnReLU1d: nniq.ConvReLU1d,
        nniqat.ConvBnReLU2d: nniq.ConvReLU2d,
        nniqat.ConvBnReLU3d: nniq.ConvReLU3d,
        nniqat.ConvReLU1d: nniq.ConvReLU1d,  # not in PyTorch's table (no default QAT swap)
        nniqat.ConvReLU2d: nniq.ConvReLU2d,
        nniqat.ConvReLU3d: nniq.ConvReLU3d,
        nniqat.LinearReLU: nniq.LinearReLU,
        nniqat.LinearBn1d: nnq.Linear,
    }


def get_default_dynamic_quant_module_mappings():
    """Float module type -> dynamic quantized module type, for :func:`quantize_dynamic`
    (PyTorch's table, less the QAT dynamic ``Linear``, which fiamma does not have): linear
    and recurrent layers become :mod:`fiamma.ao.nn.quantized.dynamic` modules, the fused
    ``LinearReLU`` the dynamic one, embeddings the weight-only ones."""
    from fiamma.ao.nn.intrinsic.quantized import dynamic as nniqd
    from fiamma.ao.nn.quantized import dynamic as nnqd
    from fiamma.nn.modules.transformer import NonDynamicallyQuantizableLinear
    return {
        nn.GRUCell: nnqd.GRUCell,
        nn.Linear: nnqd.Linear,
        NonDynamicallyQuantizableLinear: nnqd.Linear,
        nn.LSTM: nnqd.LSTM,
        nn.GRU: nnqd.GRU,
        nn.LSTMCell: nnqd.LSTMCell,
        nn.RNNCell: nnqd.RNNCell,
        nni.LinearReLU: nniqd.LinearReLU,
        nn.EmbeddingBag: nnq.EmbeddingBag,
        nn.Embedding: nnq.Embedding,
    }


def _module_class(float_module_class, mapping, additional):
    mapping = dict(mapping)
    mapping.update(additional or {})
    cls = mapping.get(float_module_class)
    if cls is None:
        raise AssertionError(f"Floating point module class {float_module_class} does not have "
                             "a corresponding quantized module class")
    return copy.deepcopy(cls)


def get_static_quant_module_class(float_module_class, additional_static_quant_mapping=None,
                                  is_reference=False):
    """The int8 module class :func:`convert` swaps ``float_module_class`` for (the default
    static mapping updated with ``additional_static_quant_mapping``); AssertionError when
    there is none."""
    if is_reference:
        raise NotImplementedError("get_static_quant_module_class: reference quantized modules "
                                  "(is_reference=True) are not supported in fiamma")
    return _module_class(float_module_class, get_default_static_quant_module_mappings(),
                         additional_static_quant_mapping)


def get_dynamic_quant_module_class(float_module_class, additional_dynamic_quant_mapping=None):
    """The dynamic quantized module class :func:`quantize_dynamic` swaps
    ``float_module_class`` for; AssertionError when there is none.

    >>> from fiamma import nn
    >>> import fiamma.ao.quantization as tq
    >>> from fiamma.ao.nn.quantized import dynamic as nnqd
    >>> tq.get_dynamic_quant_module_class(nn.LSTM) is nnqd.LSTM
    True
    """
    return _module_class(float_module_class, get_default_dynamic_quant_module_mappings(),
                         additional_dynamic_quant_mapping)


def get_embedding_static_quant_module_mappings():
    """:func:`get_default_static_quant_module_mappings` plus the QAT embeddings (``convert``
    after embedding QAT)."""
    mapping = get_default_static_quant_module_mappings()
    mapping[nnqat.EmbeddingBag] = nnq.EmbeddingBag
    mapping[nnqat.Embedding] = nnq.Embedding
    return mapping


# PyTorch quantizes these too; fiamma has no int8 kernel for them yet and says so at convert
_UNSUPPORTED = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d, nn.BatchNorm2d,
                nn.BatchNorm3d, nn.ELU, nn.LeakyReLU, nn.LayerNorm, nn.GroupNorm,
                nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.PReLU,
                nni.BNReLU2d, nni.BNReLU3d)


_INT8_PACKAGES = ("fiamma.ao.nn.quantized", "fiamma.ao.nn.intrinsic.quantized")


def _is_static_int8(cls):
    """Whether a mapping target is a static int8 module (a dynamic mapping leaves what it
    does not know float, as PyTorch does, rather than refusing it)."""
    where = getattr(cls, "__module__", "")
    return (where.startswith(_INT8_PACKAGES) and ".dynamic" not in where
            and cls not in (nnq.Embedding, nnq.EmbeddingBag))


def get_default_qat_module_mappings():
    """Float module type -> QAT module type, for ``prepare_qat`` (PyTorch's table)."""
    return {
        nn.Conv2d: nnqat.Conv2d,
        nn.Conv3d: nnqat.Conv3d,
        nn.Linear: nnqat.Linear,
        nni.ConvBn1d: nniqat.ConvBn1d,
        nni.ConvBn2d: nniqat.ConvBn2d,
        nni.ConvBn3d: nniqat.ConvBn3d,
        nni.ConvBnReLU1d: nniqat.ConvBnReLU1d,
        nni.ConvBnReLU2d: nniqat.ConvBnReLU2d,
        nni.ConvBnReLU3d: nniqat.ConvBnReLU3d,
        nni.ConvReLU2d: nniqat.ConvReLU2d,
        nni.ConvReLU3d: nniqat.ConvReLU3d,
        nni.LinearReLU: nniqat.LinearReLU,
        nni.LinearBn1d: nniqat.LinearBn1d,
    }


def get_embedding_qat_module_mappings():
    """:func:`get_default_qat_module_mappings` plus ``nn.Embedding``/``nn.EmbeddingBag`` ->
    their QAT versions (``prepare_qat(model, mapping=get_embedding_qat_module_mappings())``)."""
    mapping = get_default_qat_module_mappings()
    mapping[nn.EmbeddingBag] = nnqat.EmbeddingBag
    mapping[nn.Embedding] = nnqat.Embedding
    return mapping


# the output fake-quantizers prepare_qat gives these in training mode (their range is known)
def _module_to_act_post_process():
    return {nn.Hardsigmoid: default_fixed_qparams_range_0to1_fake_quant,
            nn.Sigmoid: default_fixed_qparams_range_0to1_fake_quant,
            nn.Softmax: default_fixed_qparams_range_0to1_fake_quant,
            nn.Tanh: default_fixed_qparams_range_neg1to1_fake_quant}


def get_default_qconfig_propagation_list():
    """Module types whose output ``prepare`` observes (PyTorch's propagation list)."""
    return (set(get_default_static_quant_module_mappings()) | set(_UNSUPPORTED)
            | set(get_default_qat_module_mappings()) | {nn.Sequential})


def propagate_qconfig_(module, qconfig_dict=None, prepare_custom_config_dict=None):
    """Give every submodule a ``qconfig``: its own, else the one set for its name or type in
    ``qconfig_dict``, else its parent's."""
    qconfig_dict = qconfig_dict or {}

    def walk(m, parent_qconfig, prefix):
        qc = qconfig_dict.get(type_before_parametrizations(m), parent_qconfig)
        qc = qconfig_dict.get(prefix, qc)
        qc = getattr(m, "qconfig", qc)
        m.qconfig = qc
        for name, child in m.named_children():
            walk(child, qc, prefix + ("." if prefix else "") + name)

    walk(module, qconfig_dict.get("", None), "")


def _needs_observation(m):
    return getattr(m, "qconfig", None) is not None


def _observer_forward_hook(self, input, output):
    return self.activation_post_process(output)


def _insert_observer(m, special=None):
    m.add_module("activation_post_process", (special or m.qconfig.activation)())
    m._observer_hook = m.register_forward_hook(_observer_forward_hook)


def _add_observer_(module, propagation_list, non_leaf_module_list=None):
    special = _module_to_act_post_process()
    for child in module.children():
        t = type_before_parametrizations(child)
        if t is nn.Dropout:
            continue
        if issubclass(t, (nnq.FloatFunctional, nnq.QFunctional)):
            if _needs_observation(child):
                child.activation_post_process = child.qconfig.activation()
        elif isinstance(child, nni._FusedModule) or t in (non_leaf_module_list or ()):
            if _needs_observation(child):
                _insert_observer(child)
        elif child.training and t in special:
            if _needs_observation(child):
                _insert_observer(child, special[t])
        else:
            _add_observer_(child, propagation_list, non_leaf_module_list)
    if (not list(module.children()) and not isinstance(module, nn.Sequential)
            and type_before_parametrizations(module) in propagation_list
            and _needs_observation(module) and not isinstance(module, DeQuantStub)):
        _insert_observer(module)


def prepare(model, inplace=False, allow_list=None, observer_non_leaf_module_list=None,
            prepare_custom_config_dict=None):
    """Propagate ``model.qconfig`` and attach an observer (``activation_post_process``, run by a
    forward hook) to each leaf module the int8 conversion needs the output range of."""
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    if not any(_needs_observation(m) for m in model.modules()):
        import warnings
        warnings.warn("None of the submodule got qconfig applied. Make sure you passed correct "
                      "configuration through `qconfig_dict` or by assigning the `.qconfig` "
                      "attribute directly on submodules", UserWarning, stacklevel=2)
    _add_observer_(model, allow_list or get_default_qconfig_propagation_list(),
                   observer_non_leaf_module_list)
    return model


def prepare_qat(model, mapping=None, inplace=False):
    """Prepare a training-mode model for quantization-aware training, as PyTorch: propagate
    ``qconfig``, swap the float modules for their QAT versions (``mapping``, default
    :func:`get_default_qat_module_mappings`: conv/linear and the fused sequences, whose
    weights are then fake-quantized on every forward), then attach the activation
    fake-quantizers as :func:`prepare` does (Hardsigmoid/Sigmoid/Softmax/Tanh get fixed-qparams
    ones)."""
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    mapping = get_default_qat_module_mappings() if mapping is None else mapping
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    convert(model, mapping=mapping, inplace=True, remove_qconfig=False)
    prepare(model, observer_non_leaf_module_list=set(mapping.values()), inplace=True)
    return model


def _remove_qconfig(module):
    for child in module.children():
        _remove_qconfig(child)
    if hasattr(module, "qconfig"):
        del module.qconfig
    app = module._modules.get("activation_post_process")
    if isinstance(app, (ObserverBase, FakeQuantizeBase)):
        del module._modules["activation_post_process"]
        hook = module.__dict__.pop("_observer_hook", None)
        if hook is not None:
            hook.remove()


def swap_module(mod, mapping, custom_module_class_mapping=None,
                use_precomputed_fake_quant=False):
    """``mapping[type(mod)].from_float(mod)`` when ``mod`` has a qconfig and a mapping; else
    ``mod``. Forward pre-hooks and other forward hooks move to the new module."""
    t = type_before_parametrizations(mod)
    if not _needs_observation(mod):
        return mod
    if t in mapping:
        new = mapping[t].from_float(mod)
        obs_hook = mod.__dict__.get("_observer_hook")
        for k, hook in mod._forward_pre_hooks.items():
            new.register_forward_pre_hook(hook)
        for k, hook in mod._forward_hooks.items():
            if obs_hook is None or k != obs_hook.id:
                new.register_forward_hook(hook)
        return new
    if t in _UNSUPPORTED and any(_is_static_int8(v) for v in mapping.values()):
        raise NotImplementedError(
            f"convert: fiamma has no int8 module for {t.__name__} yet (supported: "
            + ", ".join(sorted(k.__name__ for k in mapping)) + "); set its qconfig to None "
            "(with a DeQuantStub/QuantStub around it) to keep it in float")
    return mod


def _convert(module, mapping, custom_module_class_mapping=None):
    for name, child in list(module.named_children()):
        # fused and QAT modules are converted whole (their children are their parts)
        if not (isinstance(child, nni._FusedModule) or hasattr(child, "weight_fake_quant")):
            _convert(child, mapping)
        module._modules[name] = swap_module(child, mapping)


def convert(module, mapping=None, inplace=False, remove_qconfig=True, is_reference=False,
            convert_custom_config_dict=None, use_precomputed_fake_quant=False):
    """Swap each observed module for its int8 version (``QuantStub`` -> ``Quantize``,
    ``Conv2d``/``ConvReLU2d`` -> int8 conv with the observed output qparams, ...), then drop
    the qconfigs and remaining observers."""
    if is_reference:
        raise NotImplementedError("convert: reference quantized models (is_reference=True) "
                                  "are not supported in fiamma")
    if not inplace:
        module = copy.deepcopy(module)
    _convert(module, mapping or get_default_static_quant_module_mappings())
    if remove_qconfig:
        _remove_qconfig(module)
    return module


def quantize(model, run_fn, run_args, mapping=None, inplace=False):
    """``prepare``, ``run_fn(model, *run_args)`` (calibration), ``convert`` on an eval model."""
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    prepare(model, inplace=True)
    run_fn(model, *run_args) if isinstance(run_args, (list, tuple)) else run_fn(model, run_args)
    convert(model, mapping, inplace=True)
    return model


def quantize_qat(model, run_fn, run_args, inplace=False):
    """``prepare_qat``, ``run_fn(model, *run_args)`` (training), ``convert``."""
    if not inplace:
        model = copy.deepcopy(model)
    model.train()
    prepare_qat(model, inplace=True)
    run_fn(model, *run_args) if isinstance(run_args, (list, tuple)) else run_fn(model, run_args)
    convert(model.eval(), inplace=True)
    return model


def add_quant_dequant(module):
    """Wrap every leaf module that has a qconfig in a :class:`QuantWrapper`."""
    if not list(module.children()) and _needs_observation(module):
        return QuantWrapper(module)
    for name, child in list(module.named_children()):
        module._modules[name] = add_quant_dequant(child)
    return module


def quantize_dynamic(model, qconfig_spec=None, dtype=_qint8, mapping=None, inplace=False):
    """Dynamic (weight-only ahead of time) quantization, as PyTorch's eager mode: the chosen
    modules' weights become int8 (or float16) and their activations are quantized on every
    call with the range of that call's input.

    ``qconfig_spec``: None (every ``nn.Linear``, ``nn.LSTM``, ``nn.GRU``, ``nn.LSTMCell``,
    ``nn.RNNCell``, ``nn.GRUCell`` with the qconfig of ``dtype``: ``qint8`` ->
    ``default_dynamic_qconfig``, ``float16`` -> ``float16_dynamic_qconfig``; ``quint8`` /
    ``quint4x2`` -> the weight-only embedding qconfigs for ``nn.Embedding``/``EmbeddingBag``),
    a set of module types or submodule names (each gets ``dtype``'s qconfig), or a dict from
    types or names to qconfigs. Modules without a dynamic version (convolutions, norms, ...)
    stay float. ``mapping`` defaults to :func:`get_default_dynamic_quant_module_mappings`.
    Returns the quantized model (a copy unless ``inplace``), in eval mode."""
    import fiamma
    from fiamma.ao.quantization import qconfig as qc
    from fiamma.nn import _qtensor as Q
    per_dtype = {Q.qint8: qc.default_dynamic_qconfig, fiamma.float16: qc.float16_dynamic_qconfig,
                 Q.quint8: qc.float_qparams_weight_only_qconfig,
                 Q.quint4x2: qc.float_qparams_weight_only_qconfig_4bit}
    if qconfig_spec is None:
        if dtype is Q.qint8 or dtype is fiamma.float16:
            qconfig_spec = dict.fromkeys((nn.Linear, nn.LSTM, nn.GRU, nn.LSTMCell, nn.RNNCell,
                                          nn.GRUCell), per_dtype[dtype])
        elif dtype is Q.quint8:
            qconfig_spec = dict.fromkeys((nn.EmbeddingBag, nn.Embedding), per_dtype[dtype])
        elif dtype is Q.quint4x2:
            qconfig_spec = {nn.EmbeddingBag: per_dtype[dtype]}
        else:
            raise ValueError(f"Don't know how to quantize with default settings for {dtype}. "
                             "Provide full qconfig please")
    elif isinstance(qconfig_spec, (set, frozenset)):
        if not any(dtype is d for d in per_dtype):
            raise RuntimeError(f"quantize_dynamic: unknown dtype {dtype!r}; expected one of "
                               "fiamma.qint8, fiamma.float16, fiamma.quint8, fiamma.quint4x2")
        qconfig_spec = dict(zip(qconfig_spec, itertools.repeat(per_dtype[dtype])))
    elif not isinstance(qconfig_spec, dict):
        raise TypeError("quantize_dynamic: qconfig_spec must be None, a set of module types "
                        "or names, or a dict of them to qconfigs, got "
                        f"{type(qconfig_spec).__name__}")
    if mapping is None:
        mapping = get_default_dynamic_quant_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    propagate_qconfig_(model, qconfig_spec)
    convert(model, mapping, inplace=True)
    return model
