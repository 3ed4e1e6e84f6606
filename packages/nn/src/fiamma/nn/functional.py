"""``fiamma.nn.functional``: the functions behind the layers (the first part: linear maps,
relu, softmax; the rest arrives with their C kernels in core)."""

import warnings

import fiamma
from fiamma.nn._activation_functional import *  # noqa: F401,F403
from fiamma.nn._activation_functional import __all__ as _activations
from fiamma.nn._attention_functional import *  # noqa: F401,F403
from fiamma.nn._attention_functional import __all__ as _attention
from fiamma.nn._compat_functional import *  # noqa: F401,F403
from fiamma.nn._compat_functional import __all__ as _compat
from fiamma.nn._conv_functional import *  # noqa: F401,F403
from fiamma.nn._conv_functional import __all__ as _convs
from fiamma.nn._fractional_pool import *  # noqa: F401,F403
from fiamma.nn._fractional_pool import __all__ as _fractional
from fiamma.nn._linear_xent import linear_cross_entropy  # noqa: F401
from fiamma.nn._loss_functional import *  # noqa: F401,F403
from fiamma.nn._loss_functional import __all__ as _losses
from fiamma.nn._misc_functional import *  # noqa: F401,F403
from fiamma.nn._misc_functional import __all__ as _misc
from fiamma.nn._norm_functional import *  # noqa: F401,F403
from fiamma.nn._norm_functional import __all__ as _norms
from fiamma.nn._pool_functional import *  # noqa: F401,F403
from fiamma.nn._pool_functional import __all__ as _pools
from fiamma.nn._qtensor import QTensor as _QT
from fiamma.nn._sample_functional import *  # noqa: F401,F403
from fiamma.nn._sample_functional import __all__ as _sample

__all__ = (["linear", "bilinear", "relu", "softmax", "log_softmax", "pad", "dropout",
            "embedding"] + _losses + _activations
           + _attention + _misc + _norms + _sample + _pools + _convs + _compat + _fractional
           + ["linear_cross_entropy", "native_channel_shuffle", "conv_tbc",
              "assert_int_or_pair", "boolean_dispatch", "BroadcastingList1",
              "BroadcastingList2", "BroadcastingList3"]
           + ["has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
              "handle_torch_function"])

# torch.nn.functional re-exports the __torch_function__ helpers (fiamma.overrides)
from fiamma.overrides import (  # noqa: E402
    handle_torch_function,
    has_torch_function,
    has_torch_function_unary,
    has_torch_function_variadic,
)

_AC_ON = False  # True while an autocast region is enabled (fiamma.amp keeps it)


# output elements from which linear on an N-d input takes addmm's fused bias: below, the two
# reshapes (~2 us) cost more than the second pass over the output saves
_FUSED_BIAS_MIN = 1 << 14


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``."""
    if _AC_ON:  # on autocast's lower-precision list
        input, weight, bias = fiamma.amp.cast_lower(None, input, weight, bias)
    if bias is not None:
        nd = input.dim()
        if nd == 2:
            return fiamma.addmm(bias, input, weight.t())
        if (nd > 2 and weight.dim() == 2 and input.shape[-1] == weight.shape[1] and
                input.numel() * weight.shape[0] >= _FUSED_BIAS_MIN * max(weight.shape[1], 1) and
                input.is_contiguous() and not input.is_nested):
            # the rows of a contiguous input are one matrix: addmm's kernel adds the bias as it
            # stores the product (matmul + add is a second pass over the output)
            shape = input.shape
            out = fiamma.addmm(bias, input.reshape(-1, shape[-1]), weight.t())
            return out.view(*shape[:-1], out.shape[-1])
    out = fiamma.matmul(input, weight.t())
    return out + bias if bias is not None else out


def bilinear(input1, input2, weight, bias=None):
    """``y[..., k] = sum_ij input1[..., i] weight[k, i, j] input2[..., j] + bias[k]``."""
    # PyTorch's checks (einsum alone would broadcast a size-1 feature or batch dim silently)
    s1, s2, ws = tuple(input1.shape), tuple(input2.shape), tuple(weight.shape)
    if len(ws) != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, got {len(ws)}-d")
    if len(s1) != len(s2) or not s1:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {len(s1)} and "
                           f"{len(s2)}")
    for d in range(len(s1) - 1):
        if s1[d] != s2[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: "
                               f"got {s1[d]} and {s2[d]}")
    if s1[-1] != ws[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{s1[-1]} but expected {ws[1]}")
    if s2[-1] != ws[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{s2[-1]} but expected {ws[2]}")
    if bias is not None and tuple(bias.shape) != ws[:1]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[-1] if bias.dim() else 0} but expected {ws[0]}")
    out = fiamma.einsum("...i,kij,...j->...k", input1, weight, input2)
    return out + bias if bias is not None else out


def relu(input, inplace=False):
    if type(input) is _QT:
        return input.relu()
    return input.relu_() if inplace else fiamma.relu(input)


def _softmax_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # _stacklevel: PyTorch's, unused
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    # the method (the same function on a dense tensor): a nested tensor's own runs for it
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # _stacklevel: PyTorch's, unused
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    return input.log_softmax(dim, dtype=dtype)


pad = fiamma.pad


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero elements with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training);
    the input unchanged otherwise."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if input.is_nested:
        return input.map_dense(lambda v: dropout(v, p, True))
    if p == 1.0:
        mask = fiamma.zeros_like(input)
    else:
        # the draws of bernoulli(full_like(input, 1 - p)) (the keep probability rounded to
        # the input's dtype) without its input-sized tensor of probabilities, scaled in place
        q = fiamma.tensor(1.0 - p, dtype=input.dtype).item()
        mask = fiamma.empty_like(input).bernoulli_(q).div_(1.0 - p)
    return input.mul_(mask) if inplace else input * mask


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` selected by the integer tensor ``input`` (result shape
    ``input.shape + (embedding_dim,)``). Lookups of ``padding_idx`` pass no gradient;
    ``max_norm`` first rescales (in place) the referenced rows whose norm exceeds it;
    ``scale_grad_by_freq`` divides each row's gradient by its index's count in ``input``;
    ``sparse`` makes the weight's gradient a sparse COO tensor. One autograd node,
    ``EmbeddingBackward0`` (core's ``fiamma.embedding``)."""
    if not isinstance(input, fiamma.Tensor) or not isinstance(weight, fiamma.Tensor):
        raise TypeError(f"embedding: expected input and weight to be Tensors, got "
                        f"{type(input).__name__} and {type(weight).__name__}")
    if input.dtype.is_floating_point or input.dtype.is_complex or input.dtype is fiamma.bool:
        raise RuntimeError(f"embedding: expected an integer index tensor, got {input.dtype}")
    if input.is_nested:  # rows for the values: a nested result of the same structure
        return input.map_dense(lambda v: embedding(v, weight, padding_idx, max_norm, norm_type,
                                                   scale_grad_by_freq, sparse))
    if weight.dim() != 2:
        raise RuntimeError(f"embedding: 'weight' must be 2-D, got shape {list(weight.shape)}")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    if input.dtype is not fiamma.int64 and input.dtype is not fiamma.int32:
        input = input.long()
    if max_norm is not None:
        fiamma.embedding_renorm_(weight, input, max_norm, norm_type)
    return fiamma.embedding(weight, input, -1 if padding_idx is None else padding_idx,
                            scale_grad_by_freq, sparse)


fiamma.amp.register_autocast_flag(globals())


def native_channel_shuffle(input, groups):
    """``channel_shuffle`` (PyTorch's native kernel name)."""
    return channel_shuffle(input, groups)  # noqa: F405


def conv_tbc(input, weight, bias, pad=0):
    """A 1-d convolution in time-batch-channel layout (see ``fiamma.nn.aten.conv_tbc``)."""
    from fiamma.nn.aten import conv_tbc as f

    return f(input, weight, bias, pad)


def assert_int_or_pair(arg, arg_name, message):
    """Raise AssertionError(``message.format(arg_name)``) unless ``arg`` is an int or has two
    elements (PyTorch's helper for size arguments)."""
    if not (isinstance(arg, int) or len(arg) == 2):
        raise AssertionError(message.format(arg_name))


def boolean_dispatch(arg_name, arg_index, default, if_true, if_false, module_name,
                     func_name):
    """A function that calls ``if_true`` or ``if_false`` with its arguments, by the boolean
    argument ``arg_name`` (keyword) or at position ``arg_index`` (``default`` when absent);
    PyTorch's helper behind ``max_pool2d(..., return_indices=...)``. The result carries the
    docstring of whichever of the two has one (both having one is an error, as in PyTorch)
    and ``module_name``/``func_name`` as its ``__module__``/``__name__``.

    >>> f = boolean_dispatch("twice", 1, False, lambda x, twice=False: 2 * x,
    ...                      lambda x, twice=False: x, None, "f")
    >>> f(3), f(3, True), f(3, twice=True)
    (3, 6, 6)
    """
    def fn(*args, **kwargs):
        if arg_name in kwargs:
            flag = kwargs[arg_name]
        elif arg_index < len(args):
            flag = args[arg_index]
        else:
            flag = default
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)

    docs = [g.__doc__ for g in (if_true, if_false) if g.__doc__ is not None]
    if len(docs) > 1:
        raise RuntimeError("boolean_dispatch: only one function can have a docstring")
    fn.__doc__ = docs[0] if docs else None
    if module_name is not None:
        fn.__module__ = module_name
    if func_name is not None:
        fn.__name__ = func_name
    return fn


class _BroadcastingList:
    """TorchScript's ``BroadcastingList1/2/3[T]`` annotations ("a T or a list of N Ts"):
    subscripting gives None, as in PyTorch outside TorchScript."""

    def __getitem__(self, types):
        return None


BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingList()


fiamma.profiler.register_ops(__name__)  # F.<name> as events while a profile records

from fiamma import _torch_function  # noqa: E402

_torch_function.register_namespace(__name__)  # __torch_function__ (once it is active)

