"""Fused activations: ``gelu`` and its backward ``gelu_backward`` (csrc/activations.c), each
one C pass and one recorded autograd op (the composition ``0.5 x (1 + erf(x / sqrt 2))`` was
five). float16/bfloat16 compute in float32 and round once; other devices use the composition.
``relu_backward`` (ReLU's gradient, ``where(output > 0, grad, 0)``) is one kernel on a backend
with ``relu_bwd`` (the cuda backend's, the CPU's for float32/float64; elsewhere the comparison
and the ``where``).

>>> import fiamma
>>> [round(v, 4) for v in fiamma.gelu(fiamma.tensor([-1.0, 0.0, 1.0])).tolist()]
[-0.1587, 0.0, 0.8413]
"""

import math

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import cast
from fiamma._tensor import Tensor, new_empty

__all__ = ["gelu", "gelu_backward", "relu_backward"]

_APPROX = {"none": K.GELU_NONE, "tanh": K.GELU_TANH}
_K = math.sqrt(2.0 / math.pi)


def _approx_code(approximate, op):
    code = _APPROX.get(approximate) if isinstance(approximate, str) else None
    if code is None:
        raise ValueError(f"{op}: approximate must be 'none' or 'tanh', got {approximate!r}")
    return code


def _check(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected {what} to be a Tensor, got {type(x).__name__}")
    if x._dtype._kind != 2:
        raise TypeError(f"{op}: expected a floating point {what}, got dtype {x._dtype}")


def _operand(x, cd):
    """x as a contiguous tensor of dtype cd on its device (the kernel only reads it)."""
    if x._dtype is cd and x._contig:
        return x
    x = x.detach()
    return cast(x, cd).contiguous()


def _composed(input, approximate):
    if approximate == "none":
        return 0.5 * input * (1.0 + (input * (1.0 / math.sqrt(2.0))).erf())
    return 0.5 * input * (1.0 + (_K * (input + 0.044715 * input * input * input)).tanh())


def _native(t, dt):
    """Whether t's backend computes GELU on dtype dt's data as it is (cuda: 16-bit)."""
    f = getattr(t._storage.backend, "gelu_native", None)
    return f is not None and f(dt)


def gelu(input, approximate="none"):
    """The Gaussian error linear unit ``x * Phi(x)`` (``Phi`` the standard normal CDF);
    ``approximate='tanh'``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    Limits at infinity: ``gelu(inf) = inf``, ``gelu(-inf) = 0`` (gradients 1 and 0).

    >>> import fiamma
    >>> round(fiamma.gelu(fiamma.tensor(1.0), approximate="tanh").item(), 4)
    0.8412
    """
    op = ops.gelu
    _check(input, op)
    code = _approx_code(approximate, op)
    if not input.is_cpu and not hasattr(input._storage.backend, "gelu_fwd"):
        return _composed(input, approximate)
    recording = input.requires_grad and G.state.enabled
    if recording and code == K.GELU_NONE and input._dtype is D.float32 and G.state.tracer is None:
        # recorded float32 exact GELU: the derivative comes out of the same pass (the
        # backward is then one product; the node keeps it besides x, for double backward)
        f = getattr(input._storage.backend, "gelu_fwd_grad", None)
        if f is not None:
            x = _operand(input, D.float32)
            y = new_empty(input._shape, D.float32, input._storage.device)
            d = new_empty(input._shape, D.float32, input._storage.device)
            if f(code, x, y, d) == 0:
                G.record(op, y, (input,), {"approximate": approximate, "_grad": d})
                return y
    y = None
    if input._dtype._kind == 2 and input._dtype.itemsize == 2 and _native(input, input._dtype):
        x = input if input._contig else input.detach().contiguous()
        y = new_empty(input._shape, input._dtype, input._storage.device)
        if y._storage.backend.gelu_fwd(code, x, y) != 0:
            y = None  # declined: widened below
    if y is None:
        cd = D.float64 if input._dtype is D.float64 else D.float32
        x = _operand(input, cd)
        y = new_empty(input._shape, cd, input._storage.device)
        check(y._storage.backend.gelu_fwd(code, x, y), op)
        y = cast(y, input._dtype)
    if recording:
        G.record(op, y, (input,), {"approximate": approximate})
    return y


def gelu_backward(grad_output, input, approximate="none"):
    """``grad_output * gelu'(input)`` in one pass (the backward of :func:`gelu`; differentiable
    again, so higher-order gradients work). ``grad_output`` and ``input`` have one shape.

    >>> import fiamma
    >>> fiamma.gelu_backward(fiamma.ones(1), fiamma.zeros(1)).tolist()
    [0.5]
    """
    op = ops.gelu_backward
    _check(grad_output, op, "grad_output")
    _check(input, op)
    code = _approx_code(approximate, op)
    if tuple(grad_output._shape) != tuple(input._shape):
        raise ValueError(f"{op}: expected grad_output of shape {tuple(input._shape)}, got "
                         f"{tuple(grad_output._shape)}")
    if grad_output._storage.device != input._storage.device:
        raise RuntimeError(f"{op}: expected all tensors on one device, got {grad_output.device} "
                           f"and {input.device}")
    dt = D.promote_types(grad_output._dtype, input._dtype)
    out = None
    if dt.itemsize == 2 and grad_output._dtype is dt and input._dtype is dt and \
            _native(input, dt):
        g = grad_output if grad_output._contig else grad_output.detach().contiguous()
        x = input if input._contig else input.detach().contiguous()
        out = new_empty(input._shape, dt, input._storage.device)
        if out._storage.backend.gelu_bwd(code, g, x, out) != 0:
            out = None
    if out is None:
        cd = D.float64 if dt is D.float64 else D.float32
        g, x = _operand(grad_output, cd), _operand(input, cd)
        out = new_empty(input._shape, cd, input._storage.device)
        check(out._storage.backend.gelu_bwd(code, g, x, out), op)
        out = cast(out, dt)
    if G.state.enabled and (grad_output.requires_grad or input.requires_grad):
        G.record(op, out, (grad_output, input), {"approximate": approximate})
    return out


def relu_backward(grad_output, output):
    """ReLU's gradient ``where(output > 0, grad_output, 0)`` from the forward's ``output``
    (NaN outputs pass no gradient); differentiable again (along ``grad_output``). One pass when
    both are contiguous tensors of one float dtype and shape and the backend has the kernel
    (cuda; the CPU for float32/float64); otherwise the comparison and ``where``.

    >>> import fiamma
    >>> fiamma.relu_backward(fiamma.ones(3), fiamma.tensor([0.0, 2.0, -1.0])).tolist()
    [0.0, 1.0, 0.0]
    """
    if type(grad_output) is Tensor and type(output) is Tensor:
        st = output._storage
        fn = getattr(st.backend, "relu_bwd", None)
        dt = output._dtype
        if fn is not None and grad_output._dtype is dt and dt._kind == 2 and \
                grad_output._storage.device is st.device and grad_output._contig and \
                output._contig and grad_output._shape == output._shape:
            out = new_empty(output._shape, dt, st.device)
            if fn(grad_output, output, out) == 0:
                if G.state.enabled and (grad_output.requires_grad or output.requires_grad):
                    G.record(ops.relu_backward, out, (grad_output, output), {})
                return out
    from fiamma._ops.elementwise import where

    return where(output > 0, grad_output, 0.0)
