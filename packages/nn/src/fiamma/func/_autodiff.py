"""``grad``, ``grad_and_value``, ``vjp``, ``jvp`` and ``linearize`` (PyTorch's ``torch.func``),
built on ``fiamma.autograd.grad``, and the machinery ``_jacobian.py`` shares.

Each transform runs the function on fresh inputs that require grad (a leaf for an input that
does not require grad, an alias for one that does, so gradients still reach the caller's
graph) and differentiates with ``autograd.grad``. The derivatives are themselves recorded
(``create_graph``) when something will differentiate them: an enclosing transform (nested
``grad(grad(f))``, ``jacrev(jacrev(f))``), or ordinary autograd outside, when grad mode is on
and the function's graph reaches a tensor that requires grad from outside (an input or a
captured tensor, such as a module's parameters). Otherwise results are plain tensors.

Forward mode (``jvp``, ``jacfwd``, ``linearize``) uses the double-vjp identity: with
``u(v) = J^T v`` (a vjp recorded with ``create_graph``, linear in a dummy cotangent ``v``),
``J t`` is the vjp of ``u`` with cotangent ``t``, taken w.r.t. ``v``. It is exact (no finite
differences) and costs about two backward passes per tangent.
"""

import functools
import threading

import fiamma
from fiamma import Tensor
from fiamma.autograd._linearize import Linearized

from ._batched import (
    BTensor,
    active as _batched_active,
    expand_to,
    is_tensor,
    levels_of,
    unwrap,
)
from ._pytree import tree_flatten, tree_unflatten

_state = threading.local()


def _depth():
    return getattr(_state, "depth", 0)


class _Level:
    """Marks a differentiating transform running its function (nested ones record graphs)."""

    def __enter__(self):
        _state.depth = _depth() + 1
        self._grad = fiamma.enable_grad()
        self._grad.__enter__()

    def __exit__(self, *exc):
        self._grad.__exit__(*exc)
        _state.depth -= 1


def _autograd():
    import fiamma.autograd as ag

    return ag


def _check_argnums(argnums, nargs):
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    out = []
    for a in nums:
        if isinstance(a, bool) or not isinstance(a, int):
            raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return out


class _Inputs:
    """The differentiated inputs: flattened, replaced by fresh tensors that require grad."""

    def __init__(self, trees, levels=()):
        self.specs = []
        self.inner = []
        self.fresh = set()
        self.outer_rg = False
        self.levels = levels
        for tree in trees:
            leaves, spec = tree_flatten(tree)
            self.specs.append((len(leaves), spec))
            for x in leaves:
                self.inner.append(self._prepare(x))

    def _prepare(self, x):
        if not is_tensor(x):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if self.levels or isinstance(x, BTensor):
            # inside a batched vmap: a leaf batched over (at least) the output's levels, so
            # each element's gradient is its own (a shared leaf would sum them)
            x = expand_to(x, self.levels)
            if x.requires_grad:
                self.outer_rg = True
                return BTensor(x._v.view_as(x._v), x.lv)
            y = x._v.detach().requires_grad_(True)
            self.fresh.add(id(y))
            return BTensor(y, x.lv)
        if x.requires_grad:
            self.outer_rg = True
            return x.view_as(x)
        y = x.detach().requires_grad_(True)
        self.fresh.add(id(y))
        return y

    def trees(self, leaves):
        """``leaves`` (one per inner input) in the inputs' structures."""
        out, i = [], 0
        for n, spec in self.specs:
            out.append(tree_unflatten(leaves[i:i + n], spec))
            i += n
        return out


def _want(tree):
    """The vmap levels the differentiated inputs start batched over (inside a batched vmap:
    those of the call's arguments)."""
    return levels_of(tree) if _batched_active() else ()


def _missing(inputs, leaves):
    """Levels the outputs are batched over that some differentiated input is not (the run
    must be repeated with the inputs batched over them), or ()."""
    if not _batched_active():
        return ()
    need = set(levels_of(list(leaves)))
    if not need:
        return ()
    for x in inputs.inner:
        if not need <= set(getattr(x, "lv", ())):
            return tuple(sorted(need | set(inputs.levels)))
    return ()


def _reaches_outside(tensors, fresh):
    """Whether the graph of ``tensors`` reaches a tensor that requires grad and is not one of
    the transform's own fresh inputs (then an outer autograd may differentiate the results)."""
    stack, seen = [], set()
    for t in tensors:
        t = unwrap(t)
        if isinstance(t, Tensor) and t.requires_grad:
            if t.grad_fn is None:
                if id(t) not in fresh:
                    return True
            else:
                stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if type(node).__name__ == "AccumulateGrad":
            var = node.variable
            if var is None or id(var) not in fresh:
                return True
            continue
        stack.extend(n for n, _ in node.next_functions)
    return False


def _needs_graph(nested, outer_grad, tensors, inputs, extra=()):
    if nested:
        return True
    if not outer_grad:
        return False
    if inputs.outer_rg or any(is_tensor(t) and t.requires_grad for t in extra):
        return True
    return _reaches_outside(tensors, inputs.fresh)


def _detach_tree(tree, keep):
    if keep:
        return tree
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([x.detach() if is_tensor(x) else x for x in leaves], spec)


def _vjp_raw(outs, inputs, cts, create_graph):
    """Gradients of ``outs`` (with cotangents ``cts``) w.r.t. ``inputs``; zeros where unused."""
    pairs = [(o, c) for o, c in zip(outs, cts) if o.requires_grad]
    if pairs:
        gs = _autograd().grad([o for o, _ in pairs], inputs, [c for _, c in pairs],
                              retain_graph=True, create_graph=create_graph, allow_unused=True)
    else:
        gs = [None] * len(inputs)
    return [fiamma.zeros_like(x) if g is None else g for x, g in zip(inputs, gs)]


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if "
                           "has_aux is True")
    return out


def _check_aux(aux):
    leaves, _ = tree_flatten(aux)
    for x in leaves:
        if not is_tensor(x):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")


# ---- grad ------------------------------------------------------------------------------------

def grad_and_value(func, argnums=0, has_aux=False):
    """Like :func:`grad`, but the new function returns ``(gradient, value)`` (with
    ``has_aux``: ``(gradient, (value, aux))``).

    >>> import fiamma
    >>> from fiamma.func import grad_and_value
    >>> g, v = grad_and_value(lambda x: (x ** 2).sum())(fiamma.tensor([1., 2.]))
    >>> g.tolist(), v.item()
    ([2.0, 4.0], 5.0)
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _check_argnums(argnums, len(args))
        nested, outer_grad = _depth() > 0, fiamma.is_grad_enabled()
        api = "grad_and_value(f)(*args)"
        with _Level():
            levels = _want((args, kwargs))
            while True:
                inputs = _Inputs([args[a] for a in nums], levels)
                new_args = list(args)
                for a, tree in zip(nums, inputs.trees(inputs.inner)):
                    new_args[a] = tree
                out = func(*new_args, **kwargs)
                out, aux = _split_aux(out, has_aux, api)
                levels = _missing(inputs, [out])
                if not levels:
                    break
            if not is_tensor(out):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {out.dim()} dims. Maybe you wanted to use the "
                                   "vjp or jacrev APIs instead?")
            if has_aux:
                _check_aux(aux)
            aux_leaves = tree_flatten(aux)[0] if has_aux else []
            keep = _needs_graph(nested, outer_grad, [out, *aux_leaves], inputs)
            if out.requires_grad and not out.dtype.is_floating_point and not out.dtype.is_complex:
                out = out.detach()  # an integer result has no gradient
            gs = _vjp_raw([out], inputs.inner, [fiamma.ones_like(out)], keep)
        trees = inputs.trees(gs)
        grads = trees[0] if isinstance(argnums, int) else tuple(trees)
        grads = _detach_tree(grads, keep)
        value = out if keep else out.detach()
        if has_aux:
            return grads, (value, _detach_tree(aux, keep))
        return grads, value

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of a function returning a scalar tensor, as a new function (PyTorch's
    ``torch.func.grad``).

    ``argnums`` (an int or a tuple of ints) picks the positional arguments to differentiate
    w.r.t.; each may be a tensor or a nested dict/list/tuple of tensors, and its gradient has
    the same structure (a tuple of them for a tuple ``argnums``). With ``has_aux=True`` the
    function returns ``(scalar, aux)`` and the new one ``(gradient, aux)``. Inputs the
    result does not depend on get zero gradients. Transforms nest: ``grad(grad(f))``,
    ``vmap(grad(f))``; the gradient is differentiable by ordinary autograd when the
    function's graph reaches tensors that require grad.

    >>> import fiamma
    >>> from fiamma.func import grad
    >>> grad(lambda x: x.sin().sum())(fiamma.tensor([0.0])).tolist()
    [1.0]
    >>> grad(grad(lambda x: x ** 3))(fiamma.tensor(2.0)).item()
    12.0
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        if has_aux:
            return g, value[1]
        return g

    return wrapper


# ---- vjp ------------------------------------------------------------------------------------

def _check_outputs(leaves, api):
    for x in leaves:
        if not is_tensor(x):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(x)}")


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` returns the vector-Jacobian
    products, a tuple with one entry per primal (PyTorch's ``torch.func.vjp``). The
    cotangents have the structure of the output; ``vjp_fn`` may be called many times. With
    ``has_aux``, ``func`` returns ``(output, aux)`` and ``vjp`` returns
    ``(output, vjp_fn, aux)``.

    >>> import fiamma
    >>> from fiamma.func import vjp
    >>> out, fn = vjp(lambda x: x * 3, fiamma.tensor([1., 2.]))
    >>> fn(fiamma.tensor([1., 10.]))[0].tolist()
    [3.0, 30.0]
    """
    nested, outer_grad = _depth() > 0, fiamma.is_grad_enabled()
    api = "vjp(f, *primals)"
    with _Level():
        inputs, out, out_leaves, out_spec, aux, keep = _forward(func, primals, api, has_aux,
                                                                nested, outer_grad)

    def vjp_fn(cotangents):
        ct_leaves, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree "
                               f"structure of outputs to the function. cotangents: {ct_spec}, "
                               f"primal output: {out_spec}")
        for c in ct_leaves:
            if not is_tensor(c):
                raise RuntimeError(f"vjp_fn: expected cotangents to be tensors, got {type(c)}")
        for i, (o, c) in enumerate(zip(out_leaves, ct_leaves)):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                   f"{c.shape} and output[{i}] has a shape of {o.shape}.")
        need = (_depth() > 0 or (fiamma.is_grad_enabled() and (
            keep or any(c.requires_grad for c in ct_leaves))))
        with fiamma.enable_grad():
            gs = _vjp_raw(out_leaves, inputs.inner, ct_leaves, need)
        return tuple(_detach_tree(t, need) for t in inputs.trees(gs))

    out_ret = _detach_tree(out, keep)
    if has_aux:
        return out_ret, vjp_fn, _detach_tree(aux, keep)
    return out_ret, vjp_fn


# ---- forward mode by double vjp --------------------------------------------------------------

def _check_real(leaves, api, what):
    for i, x in enumerate(leaves):
        if is_tensor(x) and x.dtype.is_complex:
            raise RuntimeError(f"{api}: Expected all {what} to be real but received complex "
                               f"tensor at flattened input idx: {i} (fiamma computes forward "
                               "mode with the double-vjp identity, for real tensors only)")


class _Linearized(Linearized):
    """``Linearized`` over a transform's inner inputs."""

    def __init__(self, out_leaves, inputs):
        super().__init__(out_leaves, inputs.inner)


def _check_tangents(p_leaves, t_leaves):
    for p, t in zip(p_leaves, t_leaves):
        if not is_tensor(t):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise ValueError("Expected tangent to be floating point or complex, but got: "
                             f"{t.dtype}")
        if tuple(t.shape) != tuple(p.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size than "
                               "that of the original Tensor, this is not supported. Tensor is of "
                               f"size {list(p.shape)} while the given forward gradient is of "
                               f"size {list(t.shape)}.")


def _forward(func, primals, api, has_aux, nested, outer_grad, guard=None):
    """Runs ``func`` on fresh primals: (inputs, out, out_leaves, out_spec, aux, linearized)."""
    levels = _want(primals)
    while True:
        inputs = _Inputs(primals, levels)
        call_args = inputs.trees(inputs.inner)
        out = guard(func, *call_args) if guard is not None else func(*call_args)
        out, aux = _split_aux(out, has_aux, api)
        out_leaves, out_spec = tree_flatten(out)
        levels = _missing(inputs, out_leaves)
        if not levels:
            break
    _check_outputs(out_leaves, api)
    if has_aux:
        _check_aux(aux)
    aux_leaves = tree_flatten(aux)[0] if has_aux else []
    keep = _needs_graph(nested, outer_grad, [*out_leaves, *aux_leaves], inputs)
    return inputs, out, out_leaves, out_spec, aux, keep


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J @ tangents)``: the Jacobian-vector product (PyTorch's
    ``torch.func.jvp``). ``primals`` and ``tangents`` are tuples of the same structure.
    Computed exactly by the double-vjp identity (no per-op forward-mode formulas): about two
    backward passes. Real tensors only. ``strict`` is accepted, as in PyTorch.

    >>> import fiamma
    >>> from fiamma.func import jvp
    >>> out, t = jvp(lambda x: x ** 2, (fiamma.tensor([1., 3.]),), (fiamma.tensor([1., 1.]),))
    >>> t.tolist()
    [2.0, 6.0]
    """
    api = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, "
                           "tangents also must be. Got primals with structure "
                           f"{p_spec} and tangents with structure {t_spec}")
    for p in p_leaves:
        if not is_tensor(p):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(p)}")
    _check_tangents(p_leaves, t_leaves)
    _check_real(p_leaves + t_leaves, "jvp", "inputs")
    nested, outer_grad = _depth() > 0, fiamma.is_grad_enabled()
    with _Level():
        inputs, out, out_leaves, out_spec, aux, keep = _forward(
            func, primals, api, has_aux, nested, outer_grad)
        _check_real(out_leaves, "jvp", "outputs")
        keep = keep or (outer_grad and any(t.requires_grad for t in t_leaves))
        lin = _Linearized(out_leaves, inputs)
        tans = [t.to(x.dtype) for t, x in zip(t_leaves, inputs.inner)]
        res = lin.apply(tans, keep)
    tangent_out = _detach_tree(tree_unflatten(res, out_spec), keep)
    out = _detach_tree(out, keep)
    if has_aux:
        return out, tangent_out, _detach_tree(aux, keep)
    return out, tangent_out


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is ``jvp(func, primals,
    tangents)[1]`` without re-running ``func`` (PyTorch's ``torch.func.linearize``).

    >>> import fiamma
    >>> from fiamma.func import linearize
    >>> out, fn = linearize(lambda x: x.exp(), fiamma.zeros(2))
    >>> fn(fiamma.tensor([1., 2.])).tolist()
    [1.0, 2.0]
    """
    api = "linearize(func, *primals)"
    p_leaves, p_spec = tree_flatten(primals)
    _check_real([p for p in p_leaves if is_tensor(p)], "linearize", "inputs")
    nested, outer_grad = _depth() > 0, fiamma.is_grad_enabled()
    with _Level():
        inputs, out, out_leaves, out_spec, _, keep = _forward(
            func, primals, api, False, nested, outer_grad)
        _check_real(out_leaves, "linearize", "outputs")
        lin = _Linearized(out_leaves, inputs)

    def jvp_fn(*tangents):
        t_leaves, t_spec = tree_flatten(tangents)
        if t_spec != p_spec:
            raise RuntimeError(f"{api}: Expected tangents to have the same structure as primals: "
                               f"got {t_spec}, expected {p_spec}")
        _check_tangents(p_leaves, t_leaves)
        need = _depth() > 0 or (fiamma.is_grad_enabled() and (
            keep or any(t.requires_grad for t in t_leaves)))
        with fiamma.enable_grad():
            res = lin.apply([t.to(x.dtype) for t, x in zip(t_leaves, inputs.inner)], need)
        return _detach_tree(tree_unflatten(res, out_spec), need)

    return _detach_tree(out, keep), jvp_fn
