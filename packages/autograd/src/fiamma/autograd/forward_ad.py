"""Forward-mode AD with dual tensors (PyTorch's ``torch.autograd.forward_ad``).

Inside ``with dual_level():``, ``make_dual(primal, tangent)`` makes a dual tensor; every result
computed from dual tensors has a tangent (the directional derivative, J @ tangent), which
``unpack_dual(result).tangent`` returns. Tangents are gone once the level exits.

How fiamma computes them: not by propagating tangents op by op, but exactly, on demand, by the
double-vjp identity over the reverse-mode graph (``fiamma.autograd._linearize``). A dual tensor
is a view of its primal recorded by a node (``MakeDualBackward``) whose second input is a fresh
zero leaf registered with the tangent; ``unpack_dual(y)`` finds the registered leaves that
``y``'s graph reaches and returns ``sum_i J_i t_i`` by two backward passes (cached per tensor).
What follows from that (documented differences from PyTorch):

- A dual tensor, and every result computed from one inside the level, records reverse-mode
  history: ``requires_grad`` is True and ``grad_fn`` is set even when the primal does not
  require grad (PyTorch: False/None). Backward through them reaches the primal when it
  requires grad, as in PyTorch.
- Tangents flow only where reverse mode records: results computed under ``no_grad`` or
  ``inference_mode`` have no tangent (PyTorch's forward AD ignores grad mode).
- Real tensors only (complex primals or tangents are refused).

A custom ``autograd.Function`` with a ``jvp`` staticmethod applied to dual inputs gets its
``jvp`` called with the input tangents (zeros for tensor inputs without one, or None after
``ctx.set_materialize_grads(False)``; None for non-tensors), and its outputs are duals with the
returned tangents, as in PyTorch. One without ``jvp`` raises PyTorch's NotImplementedError
(fiamma's own internal Functions instead differentiate through their backward).

>>> import fiamma
>>> import fiamma.autograd.forward_ad as fwAD
>>> with fwAD.dual_level():
...     x = fwAD.make_dual(fiamma.tensor([1.0, 2.0]), fiamma.tensor([1.0, 0.0]))
...     fwAD.unpack_dual(x * x).tangent.tolist()
[2.0, 0.0]
"""

import functools
import weakref
from collections import namedtuple

import fiamma
from fiamma import Tensor
from fiamma.autograd import _fwd_state as S
from fiamma.autograd._linearize import Linearized
from fiamma.autograd._node import AccumulateGrad
from fiamma.autograd.function import Function
from fiamma.autograd_hook import version

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]


class UnpackedDualTensor(namedtuple("UnpackedDualTensor", ["primal", "tangent"])):
    """What :func:`unpack_dual` returns: ``primal`` (a view of the tensor's primal values)
    and ``tangent`` (None when the tensor has none at the level)."""

    __slots__ = ()


class _Level:
    def __init__(self, idx):
        self.idx = idx
        self.cache = {}  # id(tensor) -> (weakref, grad_fn, version, tangent)


# ---- levels ----------------------------------------------------------------------------------

def enter_dual_level():
    """Enter a new forward-AD level and return its index (0: only one level at a time)."""
    if S.level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    S.level = _Level(0)
    return S.level.idx


def exit_dual_level(*, level=None):
    """Exit the forward-AD level (the current one when ``level`` is None): every tangent of it
    is gone."""
    if S.level is None:
        raise RuntimeError("exit_dual_level: no forward AD level is active (call "
                           "enter_dual_level() first)")
    if level is not None and level != S.level.idx:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    S.level.cache.clear()
    S.level = None


class dual_level:
    """Context manager (and decorator) for a forward-AD level: ``with dual_level():`` makes
    dual tensors possible inside and destroys their tangents on exit. Levels do not nest."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


def _current(level, api):
    lvl = S.level
    if lvl is None:
        return None
    if level is not None and level != lvl.idx:
        raise RuntimeError(f"{api}: invalid level {level} (the current forward AD level is "
                           f"{lvl.idx})")
    return lvl


# ---- the nodes ---------------------------------------------------------------------------------

class _MakeDual(Function):
    """``dual = view(primal)``, with a second input: the zero leaf that stands for the tangent.
    Reverse mode sends the gradient to the primal; a tangent pass only to the leaf."""

    @staticmethod
    def forward(ctx, primal, zero):
        return primal.view_as(primal)

    @staticmethod
    def backward(ctx, g):
        if S.in_tangent_pass():
            return None, g
        return g, None


class _Primal(Function):
    """A view of a dual tensor without its tangent (``unpack_dual(...).primal``)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return None if S.in_tangent_pass() else g


MakeDualBackward = _MakeDual._backward_cls
MakeDualBackward._fwd_kind = "dual"
_Primal._backward_cls._fwd_kind = "primal"
_MakeDual._fwd_internal = _Primal._fwd_internal = True


def _attach(lvl, primal, tangent):
    """``primal`` as a dual tensor of level ``lvl`` with ``tangent`` (no checks)."""
    zero = fiamma.zeros(tuple(primal.shape), dtype=primal.dtype,
                        device=primal.device).requires_grad_(True)
    with fiamma.enable_grad():
        out = _MakeDual.apply(primal, zero)
    node = out.grad_fn
    node._fwd_level = lvl
    node._fwd_zero = zero
    node._fwd_tangent = tangent
    node._fwd_real = bool(primal.requires_grad or tangent.requires_grad)
    return out


def _scan(t, lvl):
    """``(nodes, reaches_real)``: the MakeDual nodes of ``lvl`` whose tangents reach ``t``
    (not through a node that stands for a tangent of its own) and whether ``t``'s graph reaches
    a leaf that requires grad other than the tangent leaves."""
    root = t.grad_fn
    if root is None:
        return [], bool(t.requires_grad)
    found = {}
    real = False
    seen = set()
    stack = [(root, True)]
    while stack:
        n, live = stack.pop()
        key = (id(n), live)
        if key in seen:
            continue
        seen.add(key)
        if n.__class__ is AccumulateGrad:
            real = True
            continue
        kind = getattr(n, "_fwd_kind", None)
        nxt = n._next
        if kind == "dual":
            if live and getattr(n, "_fwd_level", None) is lvl:
                found[id(n)] = n
            if nxt and nxt[0] is not None:
                stack.append((nxt[0], False))
            continue
        if kind is not None:
            live = False
        for c in nxt:
            if c is not None:
                stack.append((c, live))
    return list(found.values()), real


def _has_tangent(t, lvl):
    return isinstance(t, Tensor) and t.requires_grad and bool(_scan(t, lvl)[0])


def _tangent(t, lvl):
    """``t``'s tangent at ``lvl`` (None when it has none)."""
    return _tangent_real(t, lvl)[0]


def _tangent_real(t, lvl):
    """``(tangent or None, real)``: ``real`` tells whether ``t`` (or its tangent) depends on
    tensors that require grad for reverse mode, not only on tangent leaves."""
    if not (isinstance(t, Tensor) and t.requires_grad):
        return None, False
    fn = t.grad_fn
    if fn is not None and getattr(fn, "_fwd_level", None) is lvl:
        # a dual made by make_dual (or a Function's jvp): its tangent as given
        return fn._fwd_tangent, fn._fwd_real
    key = id(t)
    hit = lvl.cache.get(key)
    if hit is not None and hit[0]() is t and hit[1] is fn and hit[2] == version(t):
        return hit[3], hit[4]
    nodes, real = _scan(t, lvl)
    if not nodes:
        return None, real
    zeros = [n._fwd_zero for n in nodes]
    tans = [n._fwd_tangent for n in nodes]
    tans = [x if x.dtype == z.dtype else x.to(z.dtype) for x, z in zip(tans, zeros)]
    real = real or any(x.requires_grad for x in tans)
    keep = fiamma.is_grad_enabled() and real
    with S.tangent_pass():
        res = Linearized([t], zeros).apply(tans, keep)[0]
    if not keep:
        res = res.detach()
    cache = lvl.cache
    cache[key] = (weakref.ref(t, lambda _r, k=key, c=cache: c.pop(k, None)), fn, version(t), res,
                  real)
    return res, real


def _primal(t):
    with fiamma.enable_grad():
        return _Primal.apply(t)


# ---- the API ---------------------------------------------------------------------------------

def _same_layout(a, b):
    if a.dtype.is_complex != b.dtype.is_complex:
        return False
    if a.storage_offset() != b.storage_offset():
        return False
    if any(n != 1 and s1 != s2 for n, s1, s2 in zip(a.shape, a.stride(), b.stride())):
        return False
    try:
        return a.untyped_storage().nbytes() // a.element_size() == \
            b.untyped_storage().nbytes() // b.element_size()
    except (AttributeError, RuntimeError):
        return a.is_contiguous() and b.is_contiguous()


def make_dual(tensor, tangent, *, level=None):
    """A dual tensor with primal ``tensor`` and tangent ``tangent`` at the current level (a
    view of ``tensor``). ``tangent`` must have ``tensor``'s shape; when its layout (strides,
    storage) differs from the primal's it is copied into a tensor laid out as the primal,
    otherwise ``unpack_dual`` returns the very object given."""
    lvl = _current(level, "make_dual")
    if lvl is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    for what, x in (("primal", tensor), ("tangent", tangent)):
        if not isinstance(x, Tensor):
            raise TypeError(f"make_dual: expected the {what} to be a Tensor, got "
                            f"{type(x).__name__}")
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            raise ValueError(f"Expected {what} to be floating point or complex, but got: "
                             f"{x.dtype}")
        if x.dtype.is_complex:
            raise NotImplementedError(
                f"make_dual: complex {what} ({x.dtype}): fiamma's forward AD (the double-vjp "
                "identity over reverse mode) supports real tensors only")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           "that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    if tangent.device != tensor.device:
        raise RuntimeError(f"make_dual: the tangent is on {tangent.device}, the primal on "
                           f"{tensor.device}")
    if _has_tangent(tensor, lvl):
        raise RuntimeError("Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {lvl.idx} is not supported.")
    if not _same_layout(tensor, tangent):
        copy = fiamma.empty_strided(tuple(tensor.shape), tuple(tensor.stride()),
                                    dtype=tangent.dtype, device=tangent.device) \
            if _dense(tensor) else fiamma.empty(tuple(tensor.shape), dtype=tangent.dtype,
                                                device=tangent.device)
        copy.copy_(tangent)
        tangent = copy
    return _attach(lvl, tensor, tangent)


def _dense(t):
    """Whether ``t``'s strides describe a non-overlapping, dense layout (some permutation)."""
    dims = sorted((s, n) for n, s in zip(t.shape, t.stride()) if n != 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


def unpack_dual(tensor, *, level=None):
    """``UnpackedDualTensor(primal, tangent)`` of ``tensor`` at the current level: ``primal`` is
    a view of it without tangent, ``tangent`` its tangent, or None when it has none (a plain
    tensor, or after the level exited)."""
    lvl = _current(level, "unpack_dual")
    if lvl is None:
        return UnpackedDualTensor(tensor, None)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"unpack_dual: expected a Tensor, got {type(tensor).__name__}")
    tan = _tangent(tensor, lvl)
    if tan is None:
        return UnpackedDualTensor(tensor.view_as(tensor), None)
    return UnpackedDualTensor(_primal(tensor), tan)


# ---- custom Functions (called by Function.apply) ---------------------------------------------

def _function_input_tangents(cls, args):
    """The tangents of a custom Function's inputs at the active level (None when no input has
    one: the Function runs as without forward AD)."""
    lvl = S.level
    pairs = [_tangent_real(a, lvl) if isinstance(a, Tensor) else (None, False) for a in args]
    tans = [t for t, _ in pairs]
    if all(t is None for t in tans):
        return None
    if cls.jvp is Function.jvp:
        if cls.__module__.startswith("fiamma."):
            return None  # fiamma's own Functions: through their (differentiable) backward
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")
    return tans, any(r for _, r in pairs)


def _function_apply_jvp(cls, node, args, out, fw):
    """Call ``cls.jvp`` with the inputs' tangents and make the outputs duals. The jvp records
    a graph only when something may differentiate the tangents (an input or tangent that
    requires grad for reverse mode), not because dual tensors carry history."""
    tans, real = fw
    lvl = S.level
    grads = []
    for a, t in zip(args, tans):
        if not isinstance(a, Tensor):
            grads.append(None)
        elif t is None:
            grads.append(fiamma.zeros_like(a) if node._materialize else None)
        else:
            grads.append(t)
    node._in_jvp = True
    try:
        with fiamma.set_grad_enabled(real and fiamma.is_grad_enabled()):
            res = cls.jvp(node, *grads)
    finally:
        node._in_jvp = False
        node._to_save_fwd = ()
    node._fwd_kind = "jvp"
    single = not isinstance(out, tuple)
    outs = [out] if single else list(out)
    if not isinstance(res, tuple):
        res = (res,)
    if len(res) != len(outs):
        raise RuntimeError(f"function {cls.__name__}.jvp returned an incorrect number of "
                           f"forward gradients (expected {len(outs)}, got {len(res)})")
    for i, (o, t) in enumerate(zip(outs, res)):
        if t is None or not isinstance(o, Tensor):
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"function {cls.__name__}.jvp: forward gradient {i} must be a "
                            f"Tensor or None, got {type(t).__name__}")
        if tuple(t.shape) != tuple(o.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size "
                               "than that of the original Tensor, this is not supported. "
                               f"Tensor is of size {list(o.shape)} while the given forward "
                               f"gradient is of size {list(t.shape)}.")
        if not (o.dtype.is_floating_point or o.dtype.is_complex):
            continue
        if any(o is d for d in node._dirty):
            raise NotImplementedError(f"function {cls.__name__}: forward AD through a custom "
                                      "Function that modifies an input in place (mark_dirty) "
                                      "is not supported by fiamma")
        outs[i] = _attach(lvl, o, t)
    return outs[0] if single else tuple(outs)
