"""searchsorted/bucketize, unique/unique_consecutive, bincount, isin, count_nonzero and histc
recorded as themselves while a trace runs. Core records none of them (integer results, no
gradient), so a trace would bake their results in as constants: each is run with the trace
paused (its inside is not recorded) and recorded as one op with its options, which the runner
and the ONNX converters replay."""

import inspect
import numbers

import fiamma
from fiamma import Tensor

from ._errors import TracingError

__all__ = ["patch_searching"]


def patch_searching(put, live, mine, tracer):
    def orig_of(owner, name):
        return owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)

    search_orig = orig_of(fiamma, "searchsorted")

    def record_search(op, seq, input, right, out_int32, sorter, out, run):
        traced = mine(seq) or (isinstance(input, Tensor) and mine(input)) or \
            (isinstance(sorter, Tensor) and mine(sorter))
        if not (live() and traced):
            return run()
        if out is not None:
            raise TracingError(f"fiamma.jit.trace: {op}(out=...) writes into a tensor, which a "
                               f"trace cannot record ({tracer.source()}): use its result")
        scalar = not isinstance(input, Tensor)
        if scalar and not isinstance(input, numbers.Real):
            return run()  # the op raises its own error
        # the dtype both sides are compared in (the op casts them to it)
        ct = fiamma.result_type(seq, input)
        attrs = {"right": bool(right), "out_int32": bool(out_int32),
                 "scalar": input if scalar else None, "sorter": sorter is not None,
                 "compute_dtype": str(ct).split(".")[-1]}
        inputs = [seq] + ([] if scalar else [input]) + ([sorter] if sorter is not None else [])
        return tracer.leaf("searchsorted", run, inputs, attrs, [])

    def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                     sorter=None, out=None):
        def run():
            return search_orig(sorted_sequence, input, out_int32=out_int32, right=right,
                               side=side, sorter=sorter, out=out)
        if side is not None and side in ("left", "right") and not (right and side == "left"):
            right = side == "right"
        return record_search("searchsorted", sorted_sequence, input, right, out_int32, sorter,
                             out, run)

    put(fiamma, "searchsorted", searchsorted)
    bucket_orig = orig_of(fiamma, "bucketize")

    def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
        def run():
            return bucket_orig(input, boundaries, out_int32=out_int32, right=right, out=out)
        if not isinstance(boundaries, Tensor) or boundaries.dim() != 1:
            return run()  # the op raises its own error
        return record_search("bucketize", boundaries, input, right, out_int32, None, out, run)

    put(fiamma, "bucketize", bucketize)

    for owner in (fiamma, Tensor):
        _unique_like(owner, "unique", orig_of(owner, "unique"), put, live, mine, tracer)
        _unique_like(owner, "unique_consecutive", orig_of(owner, "unique_consecutive"), put,
                     live, mine, tracer)
    for name, tensors in _PLAIN.items():
        for owner in (fiamma, Tensor):
            if name in (owner.__dict__ if isinstance(owner, type) else vars(owner)):
                _plain(owner, name, orig_of(owner, name), tensors, put, live, mine, tracer)


# op -> its parameters that may be tensors (inputs of the node); the others are attributes
_PLAIN = {"bincount": ("input", "weights"), "isin": ("elements", "test_elements"),
          "count_nonzero": ("input",), "histc": ("input",)}


def _plain(owner, name, orig, tensor_params, put, live, mine, tracer):
    try:
        sig = inspect.signature(orig)
    except (TypeError, ValueError):  # no Python signature: left as it is
        return

    def fn(*args, **kw):
        try:
            bound = sig.bind(*args, **kw)
        except TypeError:
            return orig(*args, **kw)  # the op raises its own error
        given = bound.arguments
        tensors = [p for p in tensor_params if isinstance(given.get(p), Tensor)]
        if not (live() and any(mine(given[p]) for p in tensors)):
            return orig(*args, **kw)
        if given.get("out") is not None:
            raise TracingError(f"fiamma.jit.trace: {name}(out=...) writes into a tensor, which "
                               f"a trace cannot record ({tracer.source()}): use its result")
        attrs = {p: (list(v) if isinstance(v, tuple) else v) for p, v in given.items()
                 if p not in tensors and p != "out"}
        attrs["tensor_args"] = tensors
        if name == "isin":  # the dtype both sides are compared in
            attrs["compute_dtype"] = str(fiamma.result_type(
                given["elements"], given["test_elements"])).split(".")[-1]
        return tracer.leaf(name, lambda: orig(*args, **kw), [given[p] for p in tensors],
                           attrs, [])

    put(owner, name, fn)


def _unique_like(owner, name, orig, put, live, mine, tracer):
    consecutive = name == "unique_consecutive"

    def fn(input, *args, **kw):
        if not (isinstance(input, Tensor) and live() and mine(input)):
            return orig(input, *args, **kw)
        names = (["return_inverse", "return_counts", "dim"] if consecutive else
                 ["sorted", "return_inverse", "return_counts", "dim"])
        if len(args) > len(names) or any(k not in names for k in kw):
            return orig(input, *args, **kw)  # the op raises its own error
        opts = dict(zip(names, args))
        opts.update(kw)
        attrs = {"return_inverse": bool(opts.get("return_inverse", False)),
                 "return_counts": bool(opts.get("return_counts", False)),
                 "dim": None if opts.get("dim") is None else int(opts["dim"])}
        if not consecutive:
            attrs["sorted"] = bool(opts.get("sorted", True))
        return tracer.leaf(name, lambda: orig(input, *args, **kw), [input], attrs, [])

    put(owner, name, fn)
