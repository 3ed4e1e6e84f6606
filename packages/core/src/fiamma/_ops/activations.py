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

__all__ = ["gelu", "gelu_backward", "relu_backward", "selu", "selu_", "celu", "celu_",
           "threshold", "threshold_", "hardshrink", "rrelu", "rrelu_"]
# activation / activation_backward: public as fiamma.fused

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


def _same_layout(op, grad_output, input):
    """A backward's grad_output and input: one shape, one device."""
    if tuple(grad_output._shape) != tuple(input._shape):
        raise ValueError(f"{op}: expected grad_output of shape {tuple(input._shape)}, got "
                         f"{tuple(grad_output._shape)}")
    if (grad_output._storage.device is not input._storage.device and
            grad_output._storage.device != input._storage.device):
        raise RuntimeError(f"{op}: expected all tensors on one device, got {grad_output.device} "
                           f"and {input.device}")


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
    _same_layout(op, grad_output, input)
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
    """ReLU's gradient ``where(output <= 0, 0, grad_output)`` from the forward's ``output``
    (a NaN output passes its gradient, as PyTorch's threshold_backward); differentiable again
    (along ``grad_output``). One pass when both are contiguous tensors of one float dtype and
    shape and the backend has the kernel (cuda; the CPU for float32/float64); otherwise the
    comparison and ``where``.

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

    if G.state.enabled and isinstance(output, Tensor) and output.requires_grad:
        # recorded as relu_backward (as the one-pass kernel's result is), so that a gradient
        # taken with create_graph stays a function of the output (zero derivative along it)
        from fiamma._grad_mode import no_grad

        with no_grad():
            out = where(output <= 0, 0.0, grad_output)
        G.record(ops.relu_backward, out, (grad_output, output), {})
        return out
    return where(output <= 0, 0.0, grad_output)


# ---- parameterised activations (csrc/activations.c fm_act_fwd / fm_act_bwd) ------------------
# nn.functional's silu, leaky_relu, elu/selu/celu, hardswish, hardsigmoid, softplus, mish and
# logsigmoid: one C pass forward and one backward (each was two to six recorded ops), recorded
# as one op whose node has PyTorch's name (SiluBackward0, LeakyReluBackward0, EluBackward0, ...).
# float16/bfloat16 compute in float32 and round once (as PyTorch's CPU kernels); a backend
# without the kernels (cuda) computes the same formulas op by op.

_ACT_KINDS = {"silu": K.ACT_SILU, "leaky_relu": K.ACT_LEAKY_RELU, "elu": K.ACT_ELU,
              "hardswish": K.ACT_HARDSWISH, "hardsigmoid": K.ACT_HARDSIGMOID,
              "softplus": K.ACT_SOFTPLUS, "mish": K.ACT_MISH, "log_sigmoid": K.ACT_LOG_SIGMOID,
              "sigmoid": K.ACT_SIGMOID, "hardtanh": K.ACT_HARDTANH,
              "softshrink": K.ACT_SOFTSHRINK, "hardshrink": K.ACT_HARDSHRINK,
              "threshold": K.ACT_THRESHOLD, "tanh": K.ACT_TANH}
_ACT_NPARAMS = {"silu": 0, "leaky_relu": 1, "elu": 3, "hardswish": 0, "hardsigmoid": 0,
                "softplus": 2, "mish": 0, "log_sigmoid": 0, "sigmoid": 0, "hardtanh": 2,
                "softshrink": 1, "hardshrink": 1, "threshold": 2, "tanh": 0}


_BACKWARD_ONLY = ("sigmoid", "tanh")  # their forwards are fiamma.sigmoid / fiamma.tanh


def _act_params(name, params):
    n = _ACT_NPARAMS[name]
    if len(params) != n:
        raise TypeError(f"{name}: expected {n} parameters, got {len(params)}")
    out = []
    for p in params:
        if isinstance(p, Tensor):
            if p._numel != 1:
                raise ValueError(f"{name}: expected a number parameter, got a tensor of shape "
                                 f"{list(p._shape)}")
            p = p.item()
        try:
            out.append(float(p))
        except (TypeError, ValueError):
            raise TypeError(f"{name}: expected a number parameter, got "
                            f"{type(p).__name__}") from None
    return tuple(out) + (0.0,) * (3 - len(out))


def _act_composed(name, x, p):
    """The activation written in core ops (backends without the kernel; complex silu)."""
    from fiamma._ops import elementwise as E

    if name == "silu":
        return x * x.sigmoid()
    if name == "leaky_relu":
        return E.where(x > 0, x, x * p[0])
    if name == "elu":
        return E.where(x <= 0, (x * p[2]).expm1() * (p[0] * p[1]), x * p[1])
    if name == "hardswish":
        return x * (x + 3.0).clamp(0.0, 6.0) / 6.0
    if name == "hardsigmoid":
        return (x + 3.0).clamp(0.0, 6.0) / 6.0
    if name == "softplus":
        bx = x * p[0]
        return E.where(bx > p[1], x, bx.clamp(max=p[1]).exp().log1p() / p[0])
    if name == "mish":
        return x * x.exp().log1p().tanh()
    if name == "log_sigmoid":
        neg = x < 0
        return E.where(neg, x, 0.0) - E.where(neg, x, -x).exp().log1p()
    if name == "hardtanh":
        return x.clamp(p[0], p[1])
    if name == "softshrink":
        return E.where(x > p[0], x - p[0], E.where(x < -p[0], x + p[0], x * 0))
    if name == "hardshrink":
        return E.where((x >= -p[0]) & (x <= p[0]), 0.0, x)
    if name == "threshold":
        return E.where(x <= p[0], p[1], x)
    raise ValueError(f"activation: unknown activation {name!r}")


def activation(name, input, *params):
    """``name``'s activation of ``input`` (one of ``silu``, ``leaky_relu`` (negative_slope),
    ``elu`` (alpha, scale, input_scale), ``hardswish``, ``hardsigmoid``, ``softplus`` (beta,
    threshold), ``mish``, ``log_sigmoid``, ``hardtanh`` (min_val, max_val), ``softshrink``
    (lambd), ``hardshrink`` (lambd), ``threshold`` (threshold, value)), recorded as one op for
    autograd. Floating-point inputs only (``silu`` also complex), as PyTorch's kernels.

    >>> import fiamma
    >>> from fiamma import fused
    >>> [round(v, 4) for v in fused.activation("silu", fiamma.tensor([-1.0, 0.0, 2.0])).tolist()]
    [-0.2689, 0.0, 1.7616]
    """
    kind = _ACT_KINDS.get(name) if isinstance(name, str) else None
    if kind is None or name in _BACKWARD_ONLY:
        raise ValueError(f"activation: unknown activation {name!r} (expected one of "
                         f"{sorted(k for k in _ACT_KINDS if k not in _BACKWARD_ONLY)})")
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: expected input to be a Tensor, got {type(input).__name__}")
    p = _act_params(name, params)
    k = input._dtype._kind
    if k != 2:
        if k == 3 and name == "silu":
            return _act_composed(name, input, p)
        raise NotImplementedError(f"{name}: not implemented for dtype {input._dtype} (expected a "
                                  "floating point tensor)")
    op = getattr(ops, name)
    f = getattr(input._storage.backend, "act_fwd", None)
    y = None
    if f is not None:
        cd = D.float64 if input._dtype is D.float64 else D.float32
        x = _operand(input, cd)
        y = new_empty(input._shape, cd, input._storage.device)
        rc = f(kind, x, y, p[0], p[1], p[2])
        if rc == K.ERR_DTYPE or rc == K.ERR_OP:
            y = None
        else:
            check(rc, name)
            y = cast(y, input._dtype)
    if y is None:  # no kernel on this backend: the formula in float32/float64, rounded once
        from fiamma._grad_mode import no_grad

        cd = D.float64 if input._dtype is D.float64 else D.float32
        with no_grad():
            y = cast(_act_composed(name, cast(input.detach(), cd), p), input._dtype)
    if input.requires_grad and G.state.enabled:
        G.record(op, y, (input,), {"params": p[:_ACT_NPARAMS[name]]})
    return y


def activation_backward(name, grad_output, input, *params, create_graph=False):
    """``grad_output * act'(input)`` for :func:`activation`'s ``name`` in one pass, not
    recorded (the first-order backward). ``create_graph=True``: the same formula in
    differentiable ops, recorded (autograd's double backward). ``name='sigmoid'``: ``input``
    is sigmoid's OUTPUT ``y`` and the result ``grad_output * (1 - y) * y``; ``name='tanh'``
    likewise (``grad_output * (1 - y^2)``).

    >>> import fiamma
    >>> from fiamma import fused
    >>> fused.activation_backward("leaky_relu", fiamma.ones(2), fiamma.tensor([-1.0, 1.0]),
    ...                           0.5).tolist()
    [0.5, 1.0]
    """
    kind = _ACT_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"activation_backward: unknown activation {name!r}")
    op = f"{name}_backward"
    for what, t in (("grad_output", grad_output), ("input", input)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {what} to be a Tensor, got {type(t).__name__}")
    _same_layout(op, grad_output, input)
    p = _act_params(name, params)
    if create_graph:
        return _act_derivative(name, grad_output, input, p)
    dt = D.promote_types(grad_output._dtype, input._dtype)
    f = getattr(input._storage.backend, "act_bwd", None)
    if f is not None and dt._kind == 2:
        cd = D.float64 if dt is D.float64 else D.float32
        g, x = _operand(grad_output, cd), _operand(input, cd)
        out = new_empty(input._shape, cd, input._storage.device)
        rc = f(kind, g, x, out, p[0], p[1], p[2])
        if rc != K.ERR_DTYPE and rc != K.ERR_OP:
            check(rc, op)
            return cast(out, dt)
    from fiamma._grad_mode import no_grad

    cd = D.float64 if dt is D.float64 else D.float32 if dt._kind == 2 else dt
    with no_grad():
        return cast(_act_derivative(name, cast(grad_output.detach(), cd),
                                    cast(input.detach(), cd), p), dt)


def _act_derivative(name, g, x, p):
    """``g * act'(x)`` in core ops (differentiable: autograd's double backward uses it)."""
    from fiamma._ops import elementwise as E

    if name == "silu":
        s = x.sigmoid()
        return g * s * (1 + x * (1 - s))
    if name == "leaky_relu":
        return E.where(x > 0, g, g * p[0])
    if name == "elu":
        return E.where(x <= 0, g * (p[2] * p[0] * p[1]) * (x * p[2]).exp(), g * p[1])
    if name == "hardswish":
        return E.where(x <= -3.0, 0.0, E.where(x < 3.0, g * (x / 3.0 + 0.5), g))
    if name == "hardsigmoid":
        return E.where((x > -3.0) & (x < 3.0), g / 6.0, 0.0)
    if name == "softplus":
        bx = x * p[0]
        z = bx.clamp(max=p[1]).exp()
        return E.where(bx > p[1], g, g * z / (z + 1))
    if name == "mish":
        t = x.exp().log1p().tanh()
        return g * (t + x * x.sigmoid() * (1 - t * t))
    if name == "log_sigmoid":
        return g * (-x).sigmoid()
    if name == "sigmoid":
        return g * (1 - x) * x
    if name == "tanh":
        return g * (1 - x * x)
    if name == "hardtanh":
        return E.where((x <= p[0]) | (x >= p[1]), 0.0, g)
    if name in ("softshrink", "hardshrink"):
        return E.where((x >= -p[0]) & (x <= p[0]), 0.0, g)
    if name == "threshold":
        return E.where(x <= p[0], 0.0, g)
    raise ValueError(f"activation_backward: unknown activation {name!r}")


# ---- torch.* activation names (the ATen entries behind nn.functional) -----------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _in_place(input, fn, op):
    """``fn(input)`` written into ``input``; computed from a copy when autograd records, so
    what the op saved for backward is not overwritten (PyTorch's in-place activations keep
    their input's original value the same way)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    src = input.clone() if input.requires_grad and G.state.enabled else input
    return input.copy_(fn(src))


def selu(input):
    """``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))`` with PyTorch's SELU constants.

    >>> import fiamma
    >>> round(fiamma.selu(fiamma.tensor(-1.0)).item(), 4)
    -1.1113
    """
    return activation("elu", input, _SELU_ALPHA, _SELU_SCALE, 1.0)


def selu_(input):
    return _in_place(input, selu, "selu_")


def celu(input, alpha=1.0):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise ValueError("celu: ZeroDivisionError: alpha cannot be 0 for CELU")
    return activation("elu", input, alpha, 1.0, 1.0 / alpha)


def celu_(input, alpha=1.0):
    return _in_place(input, lambda x: celu(x, alpha), "celu_")


def threshold(input, threshold, value):
    """``value`` where ``input <= threshold``, else ``input`` (NaN stays). Integer tensors
    too."""
    if input._dtype._kind == 2:
        return activation("threshold", input, threshold, value)
    from fiamma._ops.elementwise import where

    return where(input <= threshold, value, input).to(input._dtype)


def threshold_(input, threshold, value):
    return _in_place(input, lambda x: globals()["threshold"](x, threshold, value), "threshold_")


def hardshrink(input, lambd=0.5):
    """``0`` where ``-lambd <= input <= lambd``, else ``input``."""
    return activation("hardshrink", input, lambd)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """Randomized leaky ReLU: in training each negative element is scaled by a slope drawn from
    ``U(lower, upper)``; otherwise by the mean slope ``(lower + upper) / 2``."""
    if not training:
        return activation("leaky_relu", input, (lower + upper) / 2)
    if not isinstance(input, Tensor) or input._dtype._kind != 2:
        raise NotImplementedError("rrelu: expected a floating point tensor")
    from fiamma._ops.elementwise import where

    slope = new_empty(input._shape, input._dtype, input._storage.device)
    slope.uniform_(lower, upper, generator=generator)
    return where(input >= 0, input, input * slope)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _in_place(input, lambda x: rrelu(x, lower, upper, training, generator), "rrelu_")


def _hardshrink_method(self, lambd=0.5):
    return hardshrink(self, lambd)


METHODS = {"hardshrink": _hardshrink_method}
