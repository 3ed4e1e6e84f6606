"""``opcheck``: test that an operator's registrations agree with its implementation."""

import importlib

from fiamma._tensor import Tensor

from . import _op

__all__ = ["opcheck", "OpCheckError"]

DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
                      "test_aot_dispatch_dynamic")
ALL_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
                  "test_aot_dispatch_static", "test_aot_dispatch_dynamic")

# the size a fake implementation's ctx.new_dynamic_size() gives under opcheck: an output
# dimension of this size matches any size of the real output
_DYNAMIC = 1_000_003


class OpCheckError(Exception):
    """A test of :func:`opcheck` failed."""


class MetadataMismatchError(Exception):
    """A fake implementation's output differs from the real output in shape or dtype."""


def _fiamma():
    return importlib.import_module("fiamma")


def _map(v, fn):
    if isinstance(v, Tensor):
        return fn(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_map(x, fn) for x in v)
    if isinstance(v, dict):
        return {k: _map(x, fn) for k, x in v.items()}
    return v


def _clone(v):
    def one(t):
        c = t.detach().clone()
        if t.requires_grad:
            c.requires_grad_(True)
        return c
    return _map(v, one)


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _same_values(a, b):
    f = _fiamma()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(f.equal(a.detach(), b.detach())) or bool(
        (f.isnan(a.detach()) & f.isnan(b.detach())).all() if a.is_floating_point() else False)


def _test_schema(op, args, kwargs):
    schema = op._schema
    pos, kw = _op.bind(schema, args, kwargs)
    before = [_clone(v) for v in pos + list(kw.values())]
    work = [_map(v, lambda t: t.detach().clone()) for v in pos + list(kw.values())]
    wpos, wkw = work[:len(pos)], dict(zip(kw, work[len(pos):]))
    f = _fiamma()
    with f.no_grad():
        out = op(*wpos, **wkw)
    for a, b, w in zip(schema.arguments, before, work):
        for t0, t1 in zip(_tensors(b), _tensors(w)):
            if not a.is_write and not _same_values(t0, t1):
                raise RuntimeError(f"Argument {a.name} is not defined as mutable but was "
                                   "mutated")
    ins = [(a, t) for a, w in zip(schema.arguments, work) for t in _tensors(w)]
    for i, o in enumerate(_outs(out)):
        if not isinstance(o, Tensor):
            continue
        ret = schema.returns[i] if i < len(schema.returns) else None
        for a, t in ins:
            if o is t or (_op._storage_key(o) is not None
                          and _op._storage_key(o) == _op._storage_key(t)):
                if ret is None or ret.alias_info is None:
                    raise RuntimeError(f"Argument {a.name} is not defined to alias output "
                                       "but was aliasing")


def _tensors(v):
    if isinstance(v, Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [x for x in v if isinstance(x, Tensor)]
    return []


def _requires_grad(args, kwargs):
    return any(t.requires_grad for t in _op.iter_tensors(list(args) + list(kwargs.values())))


def _test_autograd_registration(op, args, kwargs):
    e = op._entry
    if not _requires_grad(args, kwargs):
        return
    if e.custom is not None or e.autograd is not None or \
            "CompositeImplicitAutograd" in e.kernels or \
            any(k.startswith("Autograd") for k in e.kernels):
        return
    backends = [k for k in e.kernels if k in ("CPU", "CUDA", "CompositeExplicitAutograd")]
    if backends:
        raise AssertionError(
            f"{op.name()}: at least one input requires grad and the operator has a kernel "
            f"registered to the {backends[0]} dispatch key but not to the Autograd dispatch "
            "key; its outputs would not have gradients that PyTorch computes. Register an "
            "autograd formula (register_autograd) or an Autograd kernel.")


def _fake_impl(op):
    e = op._entry
    fn = e.kernels.get("Meta") or e.fake
    if fn is not None:
        return fn
    if not op._schema.returns:
        return lambda *a, **k: None  # nothing to describe: the op returns nothing
    raise RuntimeError(f"There was no fake impl registered for {op}. This is necessary for "
                       "fiamma.compile/fx tracing on the meta device to work. Please use "
                       f"`register_fake` to add a fake impl.")


def _test_faketensor(op, args, kwargs):
    f = _fiamma()
    pos, kw = _op.bind(op._schema, args, kwargs)
    fake = _fake_impl(op)
    with f.no_grad():
        real = op(*_map(pos, lambda t: t.detach().clone()),
                  **_map(kw, lambda t: t.detach().clone()))
        mpos = _map(pos, lambda t: t.detach().to("meta"))
        mkw = _map(kw, lambda t: t.detach().to("meta"))
        got = _op.run_fake(op, fake, mpos, mkw, on_meta=False, size_hint=_DYNAMIC)
    ro, fo = _outs(real), _outs(got)
    if real is None and got is None:
        return
    if len(ro) != len(fo):
        raise MetadataMismatchError(f"When comparing the output of {op} on fake and concrete "
                                    f"Tensors, found {len(fo)} outputs and {len(ro)}")
    for r, g in zip(ro, fo):
        if isinstance(r, Tensor) != isinstance(g, Tensor):
            raise MetadataMismatchError(f"When comparing the output of {op} on fake and "
                                        f"concrete Tensors, found {type(g).__name__} and "
                                        f"{type(r).__name__}")
        if not isinstance(r, Tensor):
            continue
        shape_ok = len(r.shape) == len(g.shape) and all(
            a == b or b == _DYNAMIC for a, b in zip(r.shape, g.shape))
        what = None
        if not shape_ok:
            what = f"Shapes {g.shape} and {r.shape} are not equal!"
        elif r.dtype != g.dtype:
            what = f"Dtypes {g.dtype} and {r.dtype} are not equal!"
        elif g.device.type not in ("meta", r.device.type):
            what = f"Devices {g.device} and {r.device} are not equal!"
        if what:
            raise MetadataMismatchError(f"When comparing the output of {op} on fake and "
                                        "concrete Tensors, found mismatched tensor metadata: "
                                        + what)


def _traced(op, args, kwargs):
    """``op`` called through an fx graph of it (None where fiamma.fx is not installed)."""
    try:
        fx = importlib.import_module("fiamma.fx")
    except ImportError:
        return None
    flat = list(_op.iter_tensors(list(args) + list(kwargs.values())))
    g = fx.Graph()
    it = iter([g.placeholder(f"t{i}") for i in range(len(flat))])
    node = g.call_function(op, _map(args, lambda t: next(it)), _map(kwargs, lambda t: next(it)))
    g.output(node)
    gm = fx.GraphModule(importlib.import_module("fiamma.nn").Module(), g)
    return gm, flat


def _test_aot_dispatch(op, args, kwargs):
    f = _fiamma()
    _fake_impl(op)  # a traced run needs one, as PyTorch's
    eager_args, eager_kwargs = _clone(args), _clone(kwargs)
    out = op(*eager_args, **eager_kwargs)
    res = _traced(op, _clone(args), _clone(kwargs))
    if res is not None:
        gm, flat = res
        out2 = gm(*flat)
        for a, b in zip(_outs(out), _outs(out2)):
            if isinstance(a, Tensor) and isinstance(b, Tensor):
                if a.shape != b.shape or a.dtype != b.dtype or not f.allclose(
                        a.detach(), b.detach(), equal_nan=True):
                    raise AssertionError(f"{op}: the traced call's output differs from the "
                                         "eager call's")
    if not _requires_grad(args, kwargs):
        return
    diff = [o for o in _outs(out) if isinstance(o, Tensor) and o.requires_grad]
    if not diff:
        return
    inputs = [t for t in _op.iter_tensors(list(eager_args) + list(eager_kwargs.values()))
              if t.requires_grad]
    gen = f.Generator().manual_seed(0)
    grads = [f.randn(o.shape, dtype=o.dtype, generator=gen) if o.is_floating_point()
             else None for o in diff]
    got = f.autograd.grad(diff, inputs, grads, allow_unused=True)
    for t, g in zip(inputs, got):
        if g is not None and (g.shape != t.shape or g.dtype != t.dtype):
            raise AssertionError(f"{op}: the gradient of an input of shape {tuple(t.shape)} "
                                 f"and dtype {t.dtype} has shape {tuple(g.shape)} and dtype "
                                 f"{g.dtype}")


_TESTS = {"test_schema": _test_schema,
          "test_autograd_registration": _test_autograd_registration,
          "test_faketensor": _test_faketensor,
          "test_aot_dispatch_static": _test_aot_dispatch,
          "test_aot_dispatch_dynamic": _test_aot_dispatch}


def opcheck(op, args, kwargs=None, *, test_utils=DEFAULT_TEST_UTILS, raise_exception=True,
            atol=None, rtol=None):
    """Check an operator's registrations on example inputs, as PyTorch's ``opcheck``:
    ``test_schema`` (only arguments declared mutable are written; outputs do not alias
    inputs), ``test_autograd_registration`` (inputs that require grad reach a gradient
    formula), ``test_faketensor`` (the fake implementation's outputs have the real outputs'
    shapes and dtypes), ``test_aot_dispatch_dynamic`` (a traced call gives the eager outputs;
    backward runs and gives gradients of the inputs' shapes). Like PyTorch's, it does not
    check that a gradient formula is mathematically right (use ``gradcheck``). Returns
    ``{test: "SUCCESS" or the exception}``; raises :class:`OpCheckError` at the first failure
    unless ``raise_exception=False``.
    """
    from ._custom_op import CustomOpDef

    if isinstance(op, CustomOpDef):
        op = op._opoverload
    elif isinstance(op, _op.OpOverloadPacket):
        op = op._default()
    elif not isinstance(op, _op.OpOverload):
        raise ValueError(f"opcheck(op, ...): op must be an OpOverload, OpOverloadPacket or "
                         f"CustomOpDef, got {type(op).__name__}")
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    if not set(test_utils) <= set(ALL_TEST_UTILS):
        raise ValueError(f"opcheck(op, ..., test_utils={test_utils}), expected test_utils to "
                         f"be subset of {ALL_TEST_UTILS} but it was not")
    args = tuple(args)
    kwargs = dict(kwargs or {})
    results = {}
    for name in test_utils:
        try:
            _TESTS[name](op, args, kwargs)
        except Exception as e:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {e}") from e
            results[name] = e
        else:
            results[name] = "SUCCESS"
    return results
