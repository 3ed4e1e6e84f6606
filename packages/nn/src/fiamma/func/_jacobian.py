"""``jacrev``, ``jacfwd`` and ``hessian`` (PyTorch's ``torch.func``): Jacobians by one vjp
per output element or one jvp (double vjp) per input element, in PyTorch's layout (output
structure outside, input structure inside, each block of shape ``out.shape + in.shape``)."""

import functools

import fiamma

from ._autodiff import (
    _check_argnums,
    _check_aux,
    _check_outputs,
    _check_real,
    _depth,
    _detach_tree,
    _Inputs,
    _Level,
    _Linearized,
    _missing,
    _needs_graph,
    _split_aux,
    _vjp_raw,
    _want,
)
from ._pytree import tree_flatten, tree_unflatten
from ._vmap import RandomGuard, check_randomness


def _basis(x, k):
    e = fiamma.zeros(x.numel(), dtype=x.dtype, device=x.device)
    e[k] = 1.0
    return e.reshape(x.shape)


def _assemble(blocks, out_leaves, out_spec, inputs, argnums):
    """``blocks[i][j]``: the (out_i.numel, in_j.numel) Jacobian block -> PyTorch's layout."""
    per_out = []
    for i, o in enumerate(out_leaves):
        jacs = [blocks[i][j].reshape(tuple(o.shape) + tuple(x.shape))
                for j, x in enumerate(inputs.inner)]
        trees = inputs.trees(jacs)
        per_out.append(trees[0] if isinstance(argnums, int) else tuple(trees))
    return tree_unflatten(per_out, out_spec)


def _jac_args(args, argnums):
    nums = _check_argnums(argnums, len(args))
    return nums, [args[a] for a in nums]


def _call_with(func, args, nums, trees, kwargs, guard=None):
    new_args = list(args)
    for a, t in zip(nums, trees):
        new_args[a] = t
    if guard is not None:
        return guard(func, *new_args, **kwargs)
    return func(*new_args, **kwargs)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of ``func`` w.r.t. the arguments ``argnums``, by reverse mode (one vjp per
    output element; PyTorch's ``torch.func.jacrev``). For an output of shape ``O`` and an
    input of shape ``I`` the Jacobian has shape ``O + I``; nested outputs and inputs give
    nested results (outputs outside, inputs inside). ``chunk_size`` (None or > 0) changes
    nothing. Real outputs only, as in PyTorch.

    >>> import fiamma
    >>> from fiamma.func import jacrev
    >>> jacrev(lambda x: x ** 2)(fiamma.tensor([1., 2.])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size <= 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums, trees = _jac_args(args, argnums)
        nested, outer_grad = _depth() > 0, fiamma.is_grad_enabled()
        api = "vjp(f, *primals)"
        with _Level():
            levels = _want((args, kwargs))
            while True:
                inputs = _Inputs(trees, levels)
                out = _call_with(func, args, nums, inputs.trees(inputs.inner), kwargs)
                out, aux = _split_aux(out, has_aux, api)
                out_leaves, out_spec = tree_flatten(out)
                levels = _missing(inputs, out_leaves)
                if not levels:
                    break
            _check_outputs(out_leaves, api)
            for i, o in enumerate(out_leaves):
                if o.dtype.is_complex:
                    raise RuntimeError("jacrev: Expected all outputs to be real but received "
                                       f"complex tensor at flattened input idx: {i}")
            if has_aux:
                _check_aux(aux)
            aux_leaves = tree_flatten(aux)[0] if has_aux else []
            keep = _needs_graph(nested, outer_grad, [*out_leaves, *aux_leaves], inputs)
            blocks = []
            for o in out_leaves:
                rows = [[] for _ in inputs.inner]
                for k in range(o.numel()):
                    gs = _vjp_raw([o], inputs.inner, [_basis(o, k)], keep)
                    for j, g in enumerate(gs):
                        rows[j].append(g.reshape(-1))
                blocks.append([fiamma.stack(r) if r else
                               fiamma.zeros(0, x.numel(), dtype=x.dtype, device=x.device)
                               for r, x in zip(rows, inputs.inner)])
        jac = _detach_tree(_assemble(blocks, out_leaves, out_spec, inputs, argnums), keep)
        if has_aux:
            return jac, _detach_tree(aux, keep)
        return jac

    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of ``func`` w.r.t. the arguments ``argnums`` by forward mode (one jvp per
    input element; PyTorch's ``torch.func.jacfwd``), with the layout of :func:`jacrev`. The
    jvps use the exact double-vjp identity (no per-op forward-mode formulas). ``randomness`` as
    in :func:`vmap`: ``'error'`` raises on a random draw inside ``func``, ``'same'`` uses one
    draw for every column, ``'different'`` runs ``func`` once per column with new draws.

    >>> import fiamma
    >>> from fiamma.func import jacfwd
    >>> jacfwd(lambda x: x.sum() * x)(fiamma.tensor([1., 2.])).tolist()
    [[4.0, 1.0], [2.0, 5.0]]
    """
    check_randomness(randomness)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums, trees = _jac_args(args, argnums)
        nested, outer_grad = _depth() > 0, fiamma.is_grad_enabled()
        api = "jvp(f, primals, tangents)"
        guard = RandomGuard(randomness)
        _check_real(tree_flatten(trees)[0], "jacfwd", "inputs")

        want = [_want((args, kwargs))]

        def run():
            while True:
                inputs = _Inputs(trees, want[0])
                out = _call_with(func, args, nums, inputs.trees(inputs.inner), kwargs, guard)
                out, aux = _split_aux(out, has_aux, api)
                out_leaves, out_spec = tree_flatten(out)
                levels = _missing(inputs, out_leaves)
                if not levels:
                    break
                want[0] = levels
            _check_outputs(out_leaves, api)
            _check_real(out_leaves, "jacfwd", "outputs")
            if has_aux:
                _check_aux(aux)
            aux_leaves = tree_flatten(aux)[0] if has_aux else []
            keep = _needs_graph(nested, outer_grad, [*out_leaves, *aux_leaves], inputs)
            return inputs, out_leaves, out_spec, aux, keep, _Linearized(out_leaves, inputs)

        with _Level():
            first = run()
            inputs, out_leaves, out_spec, aux, keep, lin = first
            cols = [[[] for _ in inputs.inner] for _ in out_leaves]
            for j, x in enumerate(inputs.inner):
                for k in range(x.numel()):
                    if randomness == "different" and (j, k) != (0, 0):
                        inputs, _, _, _, _, lin = run()
                    tans = [_basis(y, k) if jj == j else fiamma.zeros_like(y)
                            for jj, y in enumerate(inputs.inner)]
                    for i, c in enumerate(lin.apply(tans, keep)):
                        cols[i][j].append(c.reshape(-1))
            blocks = []
            for i, o in enumerate(out_leaves):
                blocks.append([fiamma.stack(c, dim=1) if c else
                               fiamma.zeros(o.numel(), 0, dtype=o.dtype, device=o.device)
                               for c in cols[i]])
            inputs = first[0]
        jac = _detach_tree(_assemble(blocks, out_leaves, out_spec, inputs, argnums), keep)
        if has_aux:
            return jac, _detach_tree(aux, keep)
        return jac

    return wrapper


def hessian(func, argnums=0):
    """The Hessian of a scalar function: ``jacfwd(jacrev(func, argnums), argnums)`` (PyTorch's
    ``torch.func.hessian``).

    >>> import fiamma
    >>> from fiamma.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(fiamma.tensor([1., 2.])).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    return jacfwd(jacrev(func, argnums), argnums)
