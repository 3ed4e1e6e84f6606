"""What the tracer wraps while a trace runs (class attributes restored afterwards; nothing is
wrapped outside a trace): value read-backs that warn, the ops core leaves out of autograd, and
the recurrent layers recorded as one op."""

import warnings

import fiamma
from fiamma import Tensor

from ._errors import TracerWarning, TracingError

# ---- TracerWarning on values read back to Python ----

_READBACK = {"item": ".item() reads a value",
             "tolist": ".tolist() reads values",
             "__bool__": "a tensor used as a Python bool (data-dependent control flow) is",
             "__int__": "int(tensor) reads a value", "__float__": "float(tensor) reads a value",
             "__index__": "a tensor used as an index reads a value"}


def _patch_readbacks(tracer):
    saved = {}
    for meth, what in _READBACK.items():
        orig = Tensor.__dict__.get(meth)
        if orig is None:
            continue
        saved[meth] = orig

        def wrapper(self, *a, _orig=orig, _what=what, _meth=meth, **k):
            # fiamma's own ops read values for checks (bounds, sizes): only the model's reads
            # are the ones a trace bakes in
            if tracer.here() and id(self) in tracer.vals and not tracer.paused and \
                    not tracer.in_library():
                if tracer.export is not None:  # raises (draft_export: notes it)
                    tracer.export.readback(_meth, tracer.source())
                else:
                    warnings.warn(
                        f"{_what} of a traced tensor: the trace records it as a constant, so "
                        f"the traced function may not generalize to other inputs "
                        f"({tracer.source()})", TracerWarning, stacklevel=2)
            return _orig(self, *a, **k)

        setattr(Tensor, meth, wrapper)
    _patch_numpy(tracer, saved)
    return saved


def _patch_numpy(tracer, saved):
    """``.numpy()`` of a tensor the trace marked: core ops that compute through NumPy
    (linalg) keep working (their result is recorded by the op); model code reading values gets
    a TracerWarning."""
    orig = Tensor.__dict__.get("numpy")
    if orig is None:
        return

    def numpy(self, *a, **k):
        if tracer.here() and id(self) in tracer.vals:
            if not tracer.in_library() and not tracer.paused:
                if tracer.export is not None:
                    tracer.export.readback("numpy", tracer.source())
                else:
                    warnings.warn(
                        "reading a traced tensor as NumPy bakes its values into the trace as "
                        f"constants ({tracer.source()})", TracerWarning, stacklevel=2)
            if id(self) in tracer.marked_ids:
                self.requires_grad = False
                try:
                    return orig(self, *a, **k)
                finally:
                    self.requires_grad = True
        return orig(self, *a, **k)

    saved["numpy"] = orig
    Tensor.numpy = numpy


def _unpatch(saved):
    for meth, orig in saved.items():
        setattr(Tensor, meth, orig)


def _unrecorded_targets():
    import fiamma.nn.functional as F

    out = [(Tensor, m, "cast") for m in ("to", "long", "int", "short", "bool", "byte", "char",
                                          "float", "double", "half", "type", "type_as")]
    out += [(Tensor, "detach", "detach"), (Tensor, "argmax", "argmax"),
            (Tensor, "argmin", "argmin"), (fiamma, "argmax", "argmax"),
            (fiamma, "argmin", "argmin"), (F, "one_hot", "one_hot")]
    return [(o, m, k) for o, m, k in out if hasattr(o, m)]


def _patch_unrecorded(tracer):
    saved = []
    for owner, meth, kind in _unrecorded_targets():
        own = owner.__dict__.get(meth) if isinstance(owner, type) else None
        orig = getattr(owner, meth)

        def wrapper(*args, _orig=orig, _kind=kind, **kwargs):
            out = _orig(*args, **kwargs)
            src = args[0] if args else None
            if (isinstance(out, Tensor) and isinstance(src, Tensor) and id(src) in tracer.vals
                    and id(out) not in tracer.vals
                    and tracer.here()):
                tracer.unrecorded(_kind, src, out, args, kwargs)
            return out

        saved.append((owner, meth, own if isinstance(owner, type) else orig))
        setattr(owner, meth, wrapper)
    return saved


def _unpatch_unrecorded(saved):
    for owner, meth, orig in reversed(saved):
        if orig is None:
            delattr(owner, meth)
        else:
            setattr(owner, meth, orig)


def _patch_rnns(module, tracer):
    """nn.RNN/LSTM/GRU run as one recorded op (their weights as the op's parameters)."""
    import fiamma.nn as nn

    patched = []
    for m in module.modules():
        if not isinstance(m, nn.RNNBase):
            continue
        orig = m.forward

        def fwd(input, hx=None, _m=m, _orig=orig):
            if not isinstance(input, Tensor):
                raise TracingError(
                    f"fiamma.jit.trace: {type(_m).__name__} with a {type(input).__name__} input "
                    "(packed sequences) cannot be traced; pass a padded tensor")
            if _m.proj_size:
                raise TracingError(f"fiamma.jit.trace: {type(_m).__name__} with proj_size is "
                                   "not supported")
            hxs = [] if hx is None else ([hx] if isinstance(hx, Tensor) else list(hx))
            attrs = {"mode": _m.mode, "input_size": _m.input_size,
                     "hidden_size": _m.hidden_size, "num_layers": _m.num_layers,
                     "bias": bool(_m.bias), "batch_first": bool(_m.batch_first),
                     "bidirectional": bool(_m.bidirectional), "has_hx": hx is not None,
                     "param_names": [k for k, _ in _m.named_parameters()]}
            params = [p for _, p in _m.named_parameters()]
            return tracer.leaf("rnn", lambda: _orig(input, hx), [input] + hxs, attrs, params)

        m.forward = fwd
        patched.append(m)
    return patched


def _patch_leaf_functions(tracer):
    """F.embedding_bag runs as one recorded op: its eager form computes the bag of each index
    from the offsets outside the recorded ops, which a trace would bake in. F.linear takes one
    path at every size."""
    import fiamma.nn.functional as F

    orig = F.embedding_bag

    def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                      scale_grad_by_freq=False, mode="mean", sparse=False,
                      per_sample_weights=None, include_last_offset=False, padding_idx=None):
        def run():
            return orig(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
                        sparse, per_sample_weights, include_last_offset, padding_idx)

        if not tracer.here():
            return run()
        if padding_idx is not None:
            padding_idx %= weight.shape[0]
        attrs = {"max_norm": max_norm, "norm_type": norm_type, "mode": mode,
                 "include_last_offset": bool(include_last_offset), "padding_idx": padding_idx}
        return tracer.leaf("embedding_bag", run,
                           [input, weight, offsets, per_sample_weights], attrs, [])

    F.embedding_bag = embedding_bag
    saved = [(F, "embedding_bag", orig)]

    # instance_norm folds the batch into the channels (a reshape to (1, N*C, ...) whose sizes
    # a trace would bake in, and which a batch of one elides): one recorded op instead, unless
    # it updates running statistics in place (the decomposed ops record those writes)
    orig_in = F.instance_norm

    def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                      use_input_stats=True, momentum=0.1, eps=1e-5):
        def run():
            return orig_in(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)

        if not tracer.here() or (use_input_stats and (running_mean is not None
                                                      or running_var is not None)):
            return run()
        attrs = {"use_input_stats": bool(use_input_stats), "eps": float(eps)}
        return tracer.leaf("instance_norm", run,
                           [input, running_mean, running_var, weight, bias], attrs, [])

    F.instance_norm = instance_norm
    saved.append((F, "instance_norm", orig_in))
    if hasattr(F, "_FUSED_BIAS_MIN"):
        # F.linear on a batch of matrices takes addmm (one pass) above a size and matmul + add
        # below it: a trace takes matmul + add at every size, so traces at different batch
        # sizes have the same ops (the dynamic-axis re-trace compares them node by node)
        saved.append((F, "_FUSED_BIAS_MIN", F._FUSED_BIAS_MIN))
        F._FUSED_BIAS_MIN = float("inf")
    return saved


def _patch_complex_views(tracer):
    """view_as_real/view_as_complex and .real/.imag reinterpret a traced tensor's memory
    without a recorded op (their result would be a constant of the trace): recorded here as
    ops of their own."""
    saved = []

    def wrap(owner, name, op, is_property=False):
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        call = orig.fget if is_property else orig

        def fn(x, *a, **k):
            if not (isinstance(x, Tensor) and tracer.here() and id(x) in tracer.vals
                    and not tracer.paused):
                return call(x, *a, **k)
            return tracer.leaf_op(op, lambda: call(x, *a, **k), x)

        saved.append((owner, name, orig))
        setattr(owner, name, property(fn) if is_property else fn)

    for fname in ("view_as_real", "view_as_complex", "real", "imag"):
        if hasattr(fiamma, fname):
            wrap(fiamma, fname, fname)
    for attr in ("real", "imag"):
        if isinstance(Tensor.__dict__.get(attr), property):
            wrap(Tensor, attr, attr, is_property=True)
    return saved
