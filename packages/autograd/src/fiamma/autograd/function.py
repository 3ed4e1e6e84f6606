"""Custom differentiable functions: ``fiamma.autograd.Function`` (PyTorch's API).

>>> import fiamma
>>> from fiamma.autograd import Function
>>> class Square(Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x
...     @staticmethod
...     def backward(ctx, grad):
...         (x,) = ctx.saved_tensors
...         return 2 * x * grad
>>> x = fiamma.tensor([3.0], requires_grad=True)
>>> Square.apply(x).sum().backward()
>>> x.grad.tolist()
[6.0]
"""

import functools

import fiamma
from fiamma import Tensor
from fiamma.autograd import _engine as E, _fwd_state
from fiamma.autograd._node import Meta, Node, _version_error, freed_error
from fiamma.autograd_hook import get_meta, is_grad_enabled, no_grad, set_meta, shape, version

__all__ = ["Function", "FunctionCtx", "once_differentiable", "BackwardCFunction"]

_new = object.__new__


class FunctionCtx:
    """The methods a Function's ``ctx`` offers (the ctx is the graph node itself)."""

    __slots__ = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save tensors or None, got "
                                f"{type(t).__name__}")
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        self._to_save_fwd = tensors

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_diff = tensors

    def set_materialize_grads(self, value):
        self._materialize = bool(value)


class BackwardCFunction(FunctionCtx, Node):
    """The node of one ``Function.apply`` call; also the ``ctx`` its methods receive."""

    _function = None  # the Function subclass (class attribute of the generated subclass)
    _fwd_kind = None  # forward AD: "jvp" when the node's outputs got tangents from its jvp

    def _init_ctx(self):
        self._init_empty()
        self._to_save = ()
        self._dirty = ()
        self._non_diff = ()
        self._materialize = True
        self._saved = None
        self._needs = ()
        self._out_meta = ()
        self._to_save_fwd = ()
        self._in_jvp = False

    @property
    def needs_input_grad(self):
        return self._needs

    @property
    def saved_tensors(self):
        if self._in_jvp:  # in jvp: what forward passed to save_for_forward
            return tuple(self._to_save_fwd)
        saved = self._saved
        if saved is None:
            if self._freed:
                raise freed_error()
            return ()
        attach = is_grad_enabled()
        res = []
        for t, saved_version, out_nr in saved:
            if t is None:
                res.append(None)
                continue
            if version(t) != saved_version:
                raise _version_error(t, saved_version)
            if out_nr is not None and attach:
                t = self._attach(t, out_nr)
            res.append(t)
        return tuple(res)

    saved_variables = saved_tensors

    def _release(self):
        self._freed = True
        self._saved = None

    def _backward(self, grad):
        if self._fwd_kind == "jvp" and _fwd_state.in_tangent_pass():
            # the outputs' tangents came from jvp: a tangent pass does not go through here
            return (None,) * len(self._next)
        grads = (grad,) if self._nout == 1 else tuple(grad)
        if self._materialize:
            grads = tuple(fiamma.zeros(shape, dtype=dt, device=dev)
                          if g is None and shape is not None
                          else g for g, (shape, dt, dev) in zip(grads, self._out_meta))
        res = self._function.backward(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self._next)
        if len(res) > n:
            if any(r is not None for r in res[n:]):
                raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                                   f"gradients (expected {n}, got {len(res)})")
            res = res[:n]
        return res


class _FunctionMeta(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,),
                                 {"_function": cls, "_op": name})


class Function(FunctionCtx, metaclass=_FunctionMeta):
    """Base class of custom differentiable functions: define static ``forward(ctx, *args)``
    (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``) and
    ``backward(ctx, *grad_outputs)``, and call ``YourFunction.apply(*args)``."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Function objects are not instantiated: call the class's apply()")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        node = _new(cls._backward_cls)
        node._init_ctx()
        is_tensor = [isinstance(a, Tensor) for a in args]
        grad = is_grad_enabled() and any(
            t and a.requires_grad for t, a in zip(is_tensor, args))
        node._needs = tuple(t and a.requires_grad for t, a in zip(is_tensor, args))
        new_style = cls.setup_context is not Function.setup_context
        fw = None
        if grad and _fwd_state.level is not None and not _fwd_state.in_tangent_pass() \
                and not getattr(cls, "_fwd_internal", False):
            from fiamma.autograd.forward_ad import _function_input_tangents

            fw = _function_input_tangents(cls, args)
        with no_grad():
            if new_style:
                out = cls.forward(*args, **kwargs)
            else:
                out = cls.forward(node, *args, **kwargs)
        if new_style:
            cls.setup_context(node, args, out)
        if not grad:
            return out
        out = _wrap_outputs(node, args, out)
        if fw is not None:
            from fiamma.autograd.forward_ad import _function_apply_jvp

            out = _function_apply_jvp(cls, node, args, out, fw)
        return out


def _wrap_outputs(node, args, out):
    single = not isinstance(out, tuple)
    outs = [out] if single else list(out)
    # the edges to the inputs (every positional argument is an input position)
    proto = E._make_node(type(node), args, {}, False)
    node._next, node._nrs = proto._next, proto._nrs
    node._shapes, node._dtypes = proto._shapes, proto._dtypes
    node._inputs = proto._inputs
    node._versions = None
    node._nout = len(outs)
    node._trace = proto._trace
    dirty = node._dirty
    non_diff = node._non_diff
    meta = []
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor):
            meta.append((None, None, None))
            continue
        meta.append((shape(o), o.dtype, o.device))
        if any(o is t for t in non_diff) or o._dtype._kind < 2:
            if not any(o is a for a in args):
                o.requires_grad = False
            continue
        if any(o is t for t in dirty):
            E.check_inplace_target(o, node.name())
            E.rebase(o, node)
            if i:
                m = get_meta(o) or Meta()
                retains = E.drop_retain(o)
                m.output_nr = i
                set_meta(o, m)
                if retains:
                    E.retain_grad(o)
            continue
        if any(o is a for a in args):
            o = outs[i] = o.detach()  # an input returned as is: a new alias gets the history
        o.grad_fn = node
        o.requires_grad = True
        if i:
            set_meta(o, Meta(i))
    node._out_meta = tuple(meta)
    saved = []
    for t in node._to_save:
        if t is None:
            saved.append((None, None, None))
            continue
        nr = next((i for i, o in enumerate(outs) if o is t), None)
        if nr is not None and not any(t is d for d in dirty):
            saved.append((t.detach(), version(t), nr))  # no reference cycle through the node
        else:
            saved.append((t, version(t), None))
    node._saved = tuple(saved)
    node._to_save = ()
    return outs[0] if single else tuple(outs)


def once_differentiable(fn):
    """Decorator for a Function's backward that is not itself differentiable: it runs without
    recording a graph."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)

    return wrapper
