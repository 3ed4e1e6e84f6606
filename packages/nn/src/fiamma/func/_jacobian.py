"""``jacrev``, ``jacfwd`` and ``hessian`` (PyTorch's ``torch.func``): Jacobians by one vjp
per output element or one jvp (double vjp) per input element, in PyTorch's layout (output
structure outside, input structure inside, each block of shape ``out.shape + in.shape``)."""

import functools

import fiamma

from . import _batched
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
from ._batched import BTensor, is_tensor, levels_of, unwrap
from ._pytree import tree_flatten, tree_unflatten
from ._vmap import _BATCHED, STATS, RandomGuard, check_randomness


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


# elements of the (expanded) differentiated inputs one batched Jacobian pass may hold; more
# rows or columns than that are done in chunks
_CAP = 1 << 24
# the batched pass from this many basis vectors on (measured on a quiet machine: it wins from
# 16 rows up, 2-5x, and for hessian's nested jacrev; vmap(hessian) 31x33 loses 1.7x; a CNN's
# 10-row jacrev inside vmap ties). Tests lower it to exercise the loop; the loop stays the
# fallback.
_MIN_BASIS = [2]


def _chunks(n, inputs, chunk_size):
    per = sum(unwrap(x).numel() for x in inputs.inner)
    chunk = chunk_size or max(1, min(n, _CAP // max(per, 1)))
    return [(s, min(chunk, n - s)) for s in range(0, n, chunk)]


def _batched_pass(body, n, inputs, chunk_size=None):
    """Runs ``body(start, m, level)`` per chunk of the ``n`` basis vectors, each time with a new
    vmap level of size ``m`` (the rules installed); the list of results, or None when something
    had no batching rule or drew random numbers (then the caller loops, exactly)."""
    if not _BATCHED[0] or n < _MIN_BASIS[0]:
        return None
    gen = fiamma.random.default_generator
    before = (gen.initial_seed(), gen.get_offset())
    res = []
    try:
        with _batched.rules_installed():
            for start, m in _chunks(n, inputs, chunk_size):
                level = _batched.push_level(m)
                try:
                    res.append(body(start, m, level))
                finally:
                    _batched.pop_level(level)
    except Exception as e:  # noqa: BLE001 - the per-basis-vector loop reproduces it or succeeds
        res = None
        STATS["last_fallback"] = f"{type(e).__name__}: {e}"
    if (gen.initial_seed(), gen.get_offset()) != before:
        gen.manual_seed(before[0])
        gen.set_offset(before[1])
        res = None
        STATS["last_fallback"] = "random draw"
    STATS["jac_fallback" if res is None else "jac_batched"] += 1
    return res


def _rerun(func, args, nums, trees, kwargs, has_aux, api, inputs, out_leaves, level):
    """``func`` again, its differentiated inputs batched over ``level`` too."""
    base = levels_of(inputs.inner)
    inp = _Inputs(trees, tuple(sorted(set(base) | {level})))
    out = _call_with(func, args, nums, inp.trees(inp.inner), kwargs)
    out, _ = _split_aux(out, has_aux, api)
    leaves = tree_flatten(out)[0]
    if len(leaves) != len(out_leaves) or any(
            not is_tensor(a) or tuple(a.shape) != tuple(b.shape)
            for a, b in zip(leaves, out_leaves)):
        raise _batched.Fallback("jacobian: the second run gave other outputs")
    return inp, leaves


def _eye_rows(n, start, m, off, k, like, shape):
    eye = fiamma.eye(n, dtype=like.dtype, device=like.device)
    return eye[start:start + m, off:off + k].reshape((m,) + tuple(shape))


def _split_blocks(full, sizes):
    out, off = [], 0
    for k in sizes:
        out.append([f[off:off + k] for f in full])
        off += k
    return out


def _batched_rows(func, args, nums, trees, kwargs, has_aux, api, inputs, out_leaves, keep,
                  chunk_size):
    """jacrev's rows in one backward pass per chunk: ``func`` rerun on inputs batched over a
    level of basis vectors, the cotangent the identity's rows along that level."""
    sizes = [o.numel() for o in out_leaves]
    n = sum(sizes)

    def body(start, m, level):
        inp, leaves = _rerun(func, args, nums, trees, kwargs, has_aux, api, inputs,
                             out_leaves, level)
        cts, off = [], 0
        for o, k in zip(leaves, sizes):
            cts.append(BTensor(_eye_rows(n, start, m, off, k, o, o.shape), (level,)))
            off += k
        gs = _vjp_raw(leaves, inp.inner, cts, keep)
        return [_batched.leave(g, level, 0, m).reshape(m, -1) for g in gs]

    parts = _batched_pass(body, n, inputs, chunk_size)
    if parts is None:
        return None
    full = [fiamma.cat([p[j] for p in parts]) if len(parts) > 1 else parts[0][j]
            for j in range(len(inputs.inner))]
    return _split_blocks(full, sizes)


def _batched_cols(func, args, nums, trees, kwargs, has_aux, api, inputs, out_leaves, keep):
    """jacfwd's columns in one double-vjp per chunk, the tangents the identity's rows along a
    level of basis vectors."""
    sizes = [x.numel() for x in inputs.inner]
    n = sum(sizes)

    def body(start, m, level):
        inp, leaves = _rerun(func, args, nums, trees, kwargs, has_aux, api, inputs,
                             out_leaves, level)
        lin = _Linearized(leaves, inp)
        tans, off = [], 0
        for x, k in zip(inp.inner, sizes):
            tans.append(BTensor(_eye_rows(n, start, m, off, k, x, x.shape), (level,)))
            off += k
        return [_batched.leave(c, level, 0, m).reshape(m, -1) for c in lin.apply(tans, keep)]

    parts = _batched_pass(body, n, inputs)
    if parts is None:
        return None
    full = [fiamma.cat([p[i] for p in parts]) if len(parts) > 1 else parts[0][i]
            for i in range(len(out_leaves))]
    # full[i]: (n, out_i.numel) -> blocks[i][j]: (out_i.numel, in_j.numel)
    by_input = _split_blocks(full, sizes)  # [input j][output i]
    return [[by_input[j][i].t() for j in range(len(sizes))] for i in range(len(out_leaves))]


def _looped_rows(inputs, out_leaves, keep):
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
    return blocks


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of ``func`` w.r.t. the arguments ``argnums``, by reverse mode (one vjp per
    output element; PyTorch's ``torch.func.jacrev``). For an output of shape ``O`` and an
    input of shape ``I`` the Jacobian has shape ``O + I``; nested outputs and inputs give
    nested results (outputs outside, inputs inside). The vjps are one batched pass: ``func``
    rerun on a batch of copies of its inputs, ``chunk_size`` (None or > 0) copies at a time;
    when ``func`` has an op without a batching rule, one backward pass per row.
    Real outputs only, as in PyTorch.

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
            blocks = _batched_rows(func, args, nums, trees, kwargs, has_aux, api, inputs,
                                   out_leaves, keep, chunk_size)
            if blocks is None:
                blocks = _looped_rows(inputs, out_leaves, keep)
        jac = _detach_tree(_assemble(blocks, out_leaves, out_spec, inputs, argnums), keep)
        if has_aux:
            return jac, _detach_tree(aux, keep)
        return jac

    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of ``func`` w.r.t. the arguments ``argnums`` by forward mode (one jvp per
    input element; PyTorch's ``torch.func.jacfwd``), with the layout of :func:`jacrev`. The
    jvps use the exact double-vjp identity (no per-op forward-mode formulas), batched over the
    columns as :func:`jacrev` batches its rows (not with ``randomness='different'``).
    ``randomness`` as in :func:`vmap`: ``'error'`` raises on a random draw inside ``func``,
    ``'same'`` uses one draw for every column, ``'different'`` runs ``func`` once per column
    with new draws.

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
            blocks = None
            if randomness != "different":
                blocks = _batched_cols(func, args, nums, trees, kwargs, has_aux, api, inputs,
                                       out_leaves, keep)
            cols = [[[] for _ in inputs.inner] for _ in out_leaves]
            for j, x in enumerate(inputs.inner if blocks is None else ()):  # the loop
                for k in range(x.numel()):
                    if randomness == "different" and (j, k) != (0, 0):
                        inputs, _, _, _, _, lin = run()
                    tans = [_basis(y, k) if jj == j else fiamma.zeros_like(y)
                            for jj, y in enumerate(inputs.inner)]
                    for i, c in enumerate(lin.apply(tans, keep)):
                        cols[i][j].append(c.reshape(-1))
            if blocks is None:
                blocks = [[fiamma.stack(c, dim=1) if c else
                           fiamma.zeros(o.numel(), 0, dtype=o.dtype, device=o.device)
                           for c in cols[i]] for i, o in enumerate(out_leaves)]
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
