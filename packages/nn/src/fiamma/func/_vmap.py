"""``vmap``: map a function over a dimension of its inputs (PyTorch's ``torch.func.vmap``).

Two paths. The batched one runs the function once, on stand-ins that carry the mapped
dimension (``_batched.BTensor``), with batching rules for the ops it meets: elementwise and
broadcasting ops, reductions and softmaxes with ``dim``, views and basic indexing, matrix
products, ``F.linear``, ``einsum``, ``stack``/``cat``, convolutions and pooling (per-element
weights included), the usual losses, and ``grad``/``vjp``/``jvp``/``jacrev``/``jacfwd``/
``hessian``/``functional_call`` nested inside. Anything else (data-dependent control flow,
``.item()``, in-place ops, random draws, an op without a rule) makes vmap fall back to the
second path: the function once per element on views that select element ``i`` of every
batched input, the results stacked along ``out_dims``, exact for every function. Errors the
function raises are the loop's; Python side effects before the failing op happen twice.
"""
import functools

import fiamma

from . import _batched
from ._batched import BTensor, Fallback, is_tensor
from ._pytree import broadcast_prefix, tree_flatten, tree_unflatten

_RANDOMNESS = ("error", "different", "same")
_RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either "
                 "use the 'same' or 'different' randomness flags on vmap or perform the "
                 "randomness operation out of vmap")


def check_randomness(randomness):
    if randomness not in _RANDOMNESS:
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def _fname(func):
    return getattr(func, "__name__", None) or repr(func)


class RandomGuard:
    """Enforces a ``randomness`` mode around calls that draw from the default generator.

    ``'error'``: a call that draws raises PyTorch's error (the draw is undone);
    ``'same'``: every call starts from the generator state the first one started from;
    ``'different'``: calls draw in sequence (different numbers each)."""

    def __init__(self, randomness):
        self.mode = randomness
        self.gen = fiamma.random.default_generator
        self.start = self.gen.get_state() if randomness == "same" else None

    def __call__(self, fn, *args, **kwargs):
        gen = self.gen
        if self.mode == "same":
            gen.set_state(self.start)
            return fn(*args, **kwargs)
        if self.mode == "different":
            return fn(*args, **kwargs)
        before = (gen.initial_seed(), gen.get_offset())
        out = fn(*args, **kwargs)
        if (gen.initial_seed(), gen.get_offset()) != before:
            gen.manual_seed(before[0])
            gen.set_offset(before[1])
            raise RuntimeError(_RANDOM_ERROR)
        return out


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorise ``func`` over dimension ``in_dims`` of its inputs (PyTorch's ``vmap``).

    ``in_dims`` is an int (every tensor input is mapped over that dimension), or a tuple with
    one entry per positional argument, each an int, None (not mapped) or a nested structure
    matching that argument's (dicts, lists, tuples). Keyword arguments are not mapped.
    ``out_dims`` says where the mapped dimension goes in each output in the same way (None:
    the output is the same for every element and is returned once). ``randomness``:
    ``'error'`` (default: a random draw from the default generator inside ``func`` raises),
    ``'different'`` (each element draws its own numbers) or ``'same'`` (every element gets
    the same draws); a function that draws runs per element. ``chunk_size`` is accepted (None
    or > 0) and changes nothing. ``func`` runs once on the whole batch when every op it uses has
    a batching rule, else once per element (exact; see the module docstring).

    >>> import fiamma
    >>> from fiamma.func import vmap
    >>> x, y = fiamma.ones(3, 4), fiamma.arange(4.)
    >>> vmap(fiamma.dot, in_dims=(0, None))(x, y).tolist()
    [6.0, 6.0, 6.0]
    >>> vmap(lambda r: r.sum(), in_dims=1)(fiamma.ones(2, 5)).shape
    fiamma.Size([5])
    """
    check_randomness(randomness)
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool)
                                   or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, args, kwargs)

    return wrapped


def _check_in_dims(func, in_dims, args):
    name = _fname(func)
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to "
                         "be int or a (potentially nested) tuple matching the structure of "
                         f"inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, "
                         "or you are trying to vmap over a function with no inputs. The latter "
                         "is unsupported.")
    flat, spec = tree_flatten(args)
    dims = broadcast_prefix(in_dims, spec)
    if dims is None:
        _, dspec = tree_flatten(in_dims)
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                         f"compatible with the structure of `inputs`. in_dims has structure "
                         f"{dspec} but inputs has structure {spec}.")
    sizes = []
    norm = []
    for x, d in zip(flat, dims):
        if d is None:
            norm.append(None)
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} "
                             "for an input but in_dim must be either an integer dimension or "
                             "None.")
        if not is_tensor(x):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} "
                             f"for an input but the input is of type {type(x)}. We cannot vmap "
                             "over non-Tensor arguments, please use None as the respective "
                             "in_dim")
        n = x.dim()
        if not -n <= d < n:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} "
                             f"for some input, but that input is a Tensor of dimensionality {n} "
                             f"so expected in_dim to satisfy -{n} <= in_dim < {n}.")
        d %= n
        norm.append(d)
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return flat, spec, norm, sizes[0]


def _vmap_call(func, in_dims, out_dims, randomness, args, kwargs):
    flat, spec, dims, batch = _check_in_dims(func, in_dims, args)
    if batch == 0:
        return _empty_batch(func, out_dims, flat, spec, dims, kwargs)
    if _BATCHED[0]:
        ok, res = _try_batched(func, out_dims, flat, spec, dims, batch, kwargs)
        if ok:
            return res
    guard = RandomGuard(randomness)
    outs = []
    for i in range(batch):
        elem = [x if d is None else x.select(d, i) for x, d in zip(flat, dims)]
        outs.append(guard(func, *tree_unflatten(elem, spec), **kwargs))
    return _stack_outputs(func, out_dims, outs, batch)


_BATCHED = [True]  # tests switch the batched path off to compare with the per-element loop
# how often the batched path ran or fell back (and why, last time): for tests and debugging
STATS = {"batched": 0, "fallback": 0, "jac_batched": 0, "jac_fallback": 0, "last_fallback": None}


def _try_batched(func, out_dims, flat, spec, dims, batch, kwargs):
    """Runs ``func`` once on ``BTensor`` inputs: ``(True, outputs)``, or ``(False, None)`` when
    something had no batching rule (or drew random numbers): then nothing is kept and the
    caller runs the exact per-element loop."""
    gen = fiamma.random.default_generator
    before = (gen.initial_seed(), gen.get_offset())
    level = _batched.push_level(batch)
    ok, res = False, None
    try:
        with _batched.rules_installed():
            elem = [x if d is None else _batched.enter(x, d, level) for x, d in zip(flat, dims)]
            out = _batched.with_rule(func)(*tree_unflatten(elem, spec), **kwargs)
            res = _leave_outputs(out_dims, out, level, batch)
            ok = True
    except Exception as e:  # noqa: BLE001 - any failure: the loop reproduces it or succeeds
        ok = False
        STATS["last_fallback"] = f"{type(e).__name__}: {e}"
    finally:
        _batched.pop_level(level)
    if (gen.initial_seed(), gen.get_offset()) != before:
        gen.manual_seed(before[0])
        gen.set_offset(before[1])
        STATS["last_fallback"] = "random draw"
        ok = False
    STATS["batched" if ok else "fallback"] += 1
    return ok, res


def _leave_outputs(out_dims, out, level, batch):
    leaves, spec = tree_flatten(out)
    if not isinstance(out_dims, (int, tuple, list, dict)) or isinstance(out_dims, bool):
        raise Fallback("out_dims")
    dims = broadcast_prefix(out_dims, spec)
    if (dims is None and isinstance(out_dims, tuple) and len(out_dims) == 1
            and spec.num_leaves == 1 and not spec.children):
        dims = [out_dims[0]]
    if dims is None:
        raise Fallback("out_dims structure")
    res = []
    for x, d in zip(leaves, dims):
        if not is_tensor(x):
            raise Fallback("a non-tensor output")
        if d is None:
            if isinstance(x, BTensor) and level in x.lv:
                raise Fallback("batched output with out_dim None")
            res.append(x)
            continue
        res.append(_batched.leave(x, level, d, batch))
    return tree_unflatten(res, spec)


def _empty_batch(func, out_dims, flat, spec, dims, kwargs):
    # no element to run: call func once on zeros shaped like one element to learn the
    # outputs' structure and shapes (random draws undone), then return them with size 0
    elem = []
    for x, d in zip(flat, dims):
        if d is None:
            elem.append(x)
        else:
            shape = tuple(x.shape[:d]) + tuple(x.shape[d + 1:])
            elem.append(fiamma.zeros(shape, dtype=x.dtype, device=x.device))
    try:
        with fiamma.random.fork_rng(), fiamma.no_grad():
            out = func(*tree_unflatten(elem, spec), **kwargs)
    except Exception as e:
        raise RuntimeError(f"vmap({_fname(func)}): the batch is empty and calling the function "
                           "on one zero-filled element to find the outputs' shapes failed "
                           f"({type(e).__name__}: {e}); fiamma's vmap runs the function per "
                           "element") from e
    return _stack_outputs(func, out_dims, [out], 1, empty=True)


def _same(a, b):
    return is_tensor(a) and a.shape == b.shape and bool(fiamma.equal(a, b))


def _stack_outputs(func, out_dims, outs, batch, empty=False):
    name = _fname(func)
    leaves0, spec = tree_flatten(outs[0])
    if not isinstance(out_dims, (int, tuple, list, dict)) or isinstance(out_dims, bool):
        if out_dims is not None:
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an "
                             "int, None or a python collection of ints representing where in "
                             "the outputs the vmapped dimension should appear.")
    dims = broadcast_prefix(out_dims, spec)
    if (dims is None and isinstance(out_dims, tuple) and len(out_dims) == 1
            and spec.num_leaves == 1 and not spec.children):
        dims = [out_dims[0]]  # out_dims=(0,) for a single output, as PyTorch allows
    if dims is None:
        _, dspec = tree_flatten(out_dims)
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not "
                         f"compatible with the structure of `outputs`. out_dims has structure "
                         f"{dspec} but outputs has structure {spec}.")
    per_elem = [leaves0]
    for o in outs[1:]:
        leaves, s = tree_flatten(o)
        if s != spec:
            raise ValueError(f"vmap({name}): the function returned outputs of different "
                             f"structures for different batch elements ({spec} and {s})")
        per_elem.append(leaves)
    result = []
    for j, d in enumerate(dims):
        col = [leaves[j] for leaves in per_elem]
        first = col[0]
        if d is None:
            if is_tensor(first) and not all(_same(c, first) for c in col[1:]):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                                 "when out_dim is None")
            result.append(first)
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an "
                             "int, None or a python collection of ints representing where in "
                             "the outputs the vmapped dimension should appear.")
        for c in col:
            if not is_tensor(c):
                raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got "
                                 f"type {type(c)}. Did you mean to set out_dims= to None for "
                                 "output?")
            if c.shape != first.shape:
                raise RuntimeError(f"vmap({name}): the function returned tensors of shapes "
                                   f"{tuple(first.shape)} and {tuple(c.shape)} for different "
                                   "batch elements (vmap needs the same shape for every element)")
        n = first.dim() + 1
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}],"
                             f" but got {d})")
        stacked = fiamma.stack(col, dim=d)
        if empty:
            stacked = stacked.detach().narrow(d, 0, 0).clone()
        result.append(stacked)
    return tree_unflatten(result, spec)
