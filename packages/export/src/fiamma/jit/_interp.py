"""Running a traced graph with fiamma's ops: the table of ops a graph may contain.

Only ops in ``OPS`` run: a loaded file names ops, never code. Each entry takes the node's
arguments (tensors resolved) and returns a tensor or a tuple of tensors.
"""

import fiamma
from fiamma.autograd_hook import get_trace_hook, set_grad_enabled_flag

from ._graph import Value
from ._symbolic import _BIG, evaluate, first_dim_source, sizes
from ._views import dynamic_target

__all__ = ["OPS", "Program"]


def _reshape(x, arg, keep=0, symsize=None):
    if symsize is not None:
        return x.reshape(sizes(arg, symsize))
    return x.reshape(tuple(x.shape[:keep]) + tuple(arg[keep:])) if keep else x.reshape(arg)


def _slice(x, arg, symsize=None):
    idx = [slice(None)] * x.dim()
    for j, (ax, start, end, step) in enumerate(arg):
        if symsize is not None:
            s0, s1 = symsize[j]
            start = start if s0 is None else evaluate(s0)
            end = end if s1 is None else evaluate(s1)
        idx[ax] = slice(start, None if end >= _BIG else end, step)
    return x[tuple(idx)]


def _expand(x, arg, symsize=None):
    if symsize is not None:
        return x.expand(*sizes(arg, symsize))
    return x.expand(*[-1 if n == m else m for n, m in zip(x.shape, arg)]) \
        if x.dim() == len(arg) else x.expand(*arg)


def _copy(src, shape, dtype):
    y = src.to(dtype)
    if tuple(y.shape) != tuple(shape) and y.dim() != len(shape):
        y = fiamma.broadcast_to(y, shape)
    return y.clone() if y is src else y


def _channel(t, nd):
    return t.reshape((1, -1) + (1,) * (nd - 2))


def _batch_norm(x, w, b, mean=None, invstd=None, training=False, eps=1e-5):
    if training:  # the batch's own statistics (instance norm, a module traced in train mode)
        return fiamma.batch_norm(x, None, None, w, b, True, 0.0, eps)
    if x.dim() >= 2 and mean.dim() == 1 and x.dtype == invstd.dtype:
        # core's fused kernel, from the variance the recorded 1/sqrt(var + eps) stands for
        var = invstd.pow(-2) - eps
        return fiamma.batch_norm(x, mean, var, w, b, False, 0.0, eps)
    nd = x.dim()
    scale = invstd if w is None else invstd * w
    y = (x - _channel(mean, nd)) * _channel(scale, nd)
    return y if b is None else y + _channel(b, nd)


def _max_pool(nd):
    f = getattr(fiamma, f"max_pool{nd}d_with_indices")
    return lambda x, **kw: f(x, **kw)


def _adaptive_max(nd):
    f = getattr(fiamma, f"adaptive_max_pool{nd}d")
    return lambda x, output_size: f(x, output_size, return_indices=True)


def _rnn(*inputs, mode, input_size, hidden_size, num_layers, bias, batch_first, bidirectional,
         has_hx, param_names, params):
    import fiamma.nn as nn

    cls = {"LSTM": nn.LSTM, "GRU": nn.GRU}.get(mode)
    kw = {}
    if cls is None:
        cls = nn.RNN
        kw["nonlinearity"] = "tanh" if mode == "RNN_TANH" else "relu"
    m = cls(input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
            bidirectional=bidirectional, **kw)
    with fiamma.no_grad():
        for name, p in zip(param_names, params):
            getattr(m, name).copy_(p)
    x = inputs[0]
    hx = None
    if has_hx:
        hx = inputs[1] if mode != "LSTM" else (inputs[1], inputs[2])
    out, h = m(x, hx)
    return (out,) + (tuple(h) if isinstance(h, tuple) else (h,))


_VIEW_STEPS = ("permute", "reshape", "slice", "expand", "unsqueeze", "squeeze")
# ops whose result shares its input's memory (a later in-place reuse must not write into it)
_ALIASING = _VIEW_STEPS + ("real", "imag", "view_as_real", "view_as_complex")

# elementwise ops with an in-place method of the same semantics (same result dtype and shape)
_INPLACE = {op: getattr(fiamma.Tensor, op + "_") for op in (
    "relu", "add", "sub", "mul", "div", "sigmoid", "tanh", "exp", "neg", "abs", "clamp",
    "hardtanh", "silu", "gelu", "hardswish", "hardsigmoid", "leaky_relu", "elu")
    if hasattr(fiamma.Tensor, op + "_")}

def _maxmin(f, am):
    def run(x, dim=None, keepdim=False):
        if dim is None or isinstance(dim, (tuple, list)):
            return am(x, tuple(range(x.dim())) if dim is None else dim, keepdim)
        r = f(x, dim, keepdim)
        return (r[0], r[1])
    return run


def _embedding_bag(input, weight, offsets, per_sample_weights, params=(), **kw):
    import fiamma.nn.functional as F

    return F.embedding_bag(input, weight, offsets, per_sample_weights=per_sample_weights, **kw)


def _instance_norm(input, running_mean, running_var, weight, bias, params=(), **kw):
    import fiamma.nn.functional as F

    return F.instance_norm(input, running_mean, running_var, weight, bias, **kw)


def _full(size, symsize, fill_value, dtype):
    src = first_dim_source(symsize)
    return fiamma.full(sizes(size, symsize), fill_value, dtype=dtype,
                       device=src.device if src is not None else None)


def _arange(size, symsize, dtype):
    src = first_dim_source(symsize)
    return fiamma.arange(*sizes(size, symsize), dtype=dtype,
                         device=src.device if src is not None else None)


def _pad(x, pad, sympad=None, **kw):
    return fiamma.pad(x, sizes(pad, sympad) if sympad is not None else pad, **kw)


def _upsample(x, size, symsize=None, **kw):
    return fiamma.upsample(x, size=sizes(size, symsize) if symsize is not None else size, **kw)


def _one_hot(x, num_classes):
    import fiamma.nn.functional as F

    return F.one_hot(x, num_classes)


def _nonzero(x, as_tuple=False):
    r = fiamma.nonzero(x, as_tuple=as_tuple)
    return r[0] if as_tuple and len(r) == 1 else r


def _topk(x, k, dim=-1, largest=True, sorted=True, symk=None):
    if symk is not None:
        k = evaluate(symk)
    return tuple(fiamma.topk(x, k, dim, largest, sorted))


def _nms(boxes, scores, iou_threshold):
    import fiamma.detection

    return fiamma.detection.nms(boxes, scores, iou_threshold)


def _roi_align(x, rois, output_size, spatial_scale, sampling_ratio, aligned, params=()):
    try:
        from fiamma.vision.ops.roi_align import roi_align
    except ImportError as e:
        raise RuntimeError("fiamma.jit: this graph runs roi_align, which needs fiamma-vision "
                           f"(pip install fiamma-vision): {e}") from None
    return roi_align(x, rois, output_size, spatial_scale, sampling_ratio, aligned)


def _searchsorted(seq, *rest, right=False, out_int32=False, scalar=None, sorter=False,
                  compute_dtype=None, params=()):
    x = scalar if scalar is not None else rest[0]
    return fiamma.searchsorted(seq, x, right=right, out_int32=out_int32,
                               sorter=rest[-1] if sorter else None)


def _unique(consecutive):
    def run(x, return_inverse=False, return_counts=False, dim=None, sorted=True, params=()):
        if consecutive:
            return fiamma.unique_consecutive(x, return_inverse, return_counts, dim)
        return fiamma.unique(x, sorted, return_inverse, return_counts, dim)
    return run


def _plain(name):
    """An op recorded with its tensor arguments named in ``tensor_args`` (jit/_searching.py)."""
    def run(*tensors, tensor_args=(), params=(), compute_dtype=None, **attrs):
        attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
        return getattr(fiamma, name)(**dict(zip(tensor_args, tensors)), **attrs)
    return run


def _heatmaps_to_keypoints(maps, rois, params=()):
    try:
        from fiamma.vision.models.detection.roi_heads import heatmaps_to_keypoints
    except ImportError as e:
        raise RuntimeError("fiamma.jit: this graph runs heatmaps_to_keypoints (Keypoint "
                           "R-CNN), which needs fiamma-vision (pip install fiamma-vision): "
                           f"{e}") from None
    return heatmaps_to_keypoints(maps, rois)


OPS = {
    "argsort": lambda x, dim=-1, descending=False, stable=False: fiamma.argsort(
        x, dim, descending, stable),
    "nonzero": _nonzero,
    "topk": _topk,
    "nms": _nms,
    "roi_align": _roi_align,
    "heatmaps_to_keypoints": _heatmaps_to_keypoints,
    "searchsorted": _searchsorted,
    "unique": _unique(False),
    "unique_consecutive": _unique(True),
    "bincount": _plain("bincount"),
    "isin": _plain("isin"),
    "count_nonzero": _plain("count_nonzero"),
    "histc": _plain("histc"),
    "permute": lambda x, arg: x.permute(*arg),
    "reshape": _reshape,
    "slice": _slice,
    "expand": _expand,
    "copy": _copy,
    "batch_norm": _batch_norm,
    "layer_norm": lambda x, w, b, normalized_shape, eps: fiamma.layer_norm(
        x, normalized_shape, w, b, eps),
    "group_norm": lambda x, w, b, num_groups, eps: fiamma.group_norm(x, num_groups, w, b, eps),
    "rms_norm": lambda x, w, normalized_shape, eps: fiamma.rms_norm(x, normalized_shape, w, eps),
    "max_pool1d": _max_pool(1), "max_pool2d": _max_pool(2), "max_pool3d": _max_pool(3),
    "adaptive_max_pool1d": _adaptive_max(1), "adaptive_max_pool2d": _adaptive_max(2),
    "cat": lambda *parts, dim=0: fiamma.cat(list(parts), dim),
    "stack": lambda *parts, dim=0: fiamma.stack(list(parts), dim),
    "to": lambda x, dtype: x.to(dtype),
    "clone": lambda x, **kw: x.clone(),
    "index": lambda x, indices: x[tuple(slice(None) if i is None else i for i in indices)],
    "rnn": _rnn,
    "max": _maxmin(fiamma.max, fiamma.amax),
    "min": _maxmin(fiamma.min, fiamma.amin),
    "one_hot": _one_hot,
    "im2col": lambda x, **kw: fiamma.im2col(x, **kw),
    "full": _full,
    "upsample": _upsample,
    "pad": _pad,
    "unsqueeze": lambda x, dim: x.unsqueeze(dim),
    "squeeze": lambda x, dim: x.squeeze(dim),
    "view_as_real": lambda x: fiamma.view_as_real(x),
    "view_as_complex": lambda x: fiamma.view_as_complex(x),
    "real": lambda x: x.real,
    "imag": lambda x: x.imag,
    "arange": _arange,
    "repeat": lambda x, repeats: x.repeat(*repeats),
    "col2im": lambda x, **kw: fiamma.col2im(x, **kw),
    "grid_sampler": lambda x, grid, **kw: fiamma.grid_sampler(x, grid, **kw),
    "embedding_bag": _embedding_bag,
    "instance_norm": _instance_norm,
}

# fiamma.fft's transforms (recorded as fft_<name> with their own keyword arguments) and
# fiamma.linalg's ops (linalg_<name>; a namedtuple result is the node's several outputs)
for _n in ("fft ifft rfft irfft hfft ihfft fft2 ifft2 rfft2 irfft2 hfft2 ihfft2 fftn ifftn "
           "rfftn irfftn hfftn ihfftn").split():
    OPS["fft_" + _n] = getattr(fiamma.fft, _n)
OPS["fftshift"], OPS["ifftshift"] = fiamma.fft.fftshift, fiamma.fft.ifftshift
for _n in ("det slogdet inv inv_ex pinv matrix_power solve solve_ex solve_triangular "
           "cholesky cholesky_ex qr svd svdvals eigh eigvalsh matrix_norm cond cross "
           "matrix_exp lu lu_factor lu_factor_ex lu_solve").split():
    if hasattr(fiamma.linalg, _n):
        OPS["linalg_" + _n] = getattr(fiamma.linalg, _n)
if hasattr(fiamma, "lu_unpack"):
    OPS["lu_unpack"] = fiamma.lu_unpack

# ops whose recorded arguments are those of the public function of the same name
_PUBLIC = """
abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh
asinh acosh atanh sigmoid relu erf erfc floor ceil round trunc sign reciprocal square silu mish
gelu hardtanh leaky_relu elu selu celu softplus hardsigmoid hardswish relu6 logit
add sub mul div pow maximum minimum fmod remainder atan2 eq ne lt le gt ge logical_and
logical_or logical_not where clamp clamp_min clamp_max softmax log_softmax matmul mm bmm addmm
baddbmm sum mean amax amin prod cumsum index_select gather masked_fill convolution
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d avg_pool1d avg_pool2d avg_pool3d
upsample pad prelu var std logsumexp norm tril triu flip roll repeat tile argmax argmin
topk sort any all index_fill index_copy scatter index_put bitwise_and bitwise_or bitwise_xor
floor_divide repeat_interleave addcmul addcdiv
""".split()

for _n in _PUBLIC:
    if _n not in OPS and callable(getattr(fiamma, _n, None)):
        OPS[_n] = getattr(fiamma, _n)


def _activation_runner(name):
    """core's fused activations (fiamma.fused.activation), recorded with their parameters"""
    def run(x, params=()):
        return fiamma.fused.activation(name, x, *params)
    return run


for _n in ("silu", "leaky_relu", "elu", "hardswish", "hardsigmoid", "softplus", "mish",
           "log_sigmoid", "hardtanh", "softshrink", "hardshrink", "threshold"):
    OPS[_n] = _activation_runner(_n)


def _loss_runner(name):
    """core's fused elementwise losses (fiamma.fused.loss), recorded with the weights as
    arguments and reduction/param as keywords"""
    def run(x, t, weight=None, pos_weight=None, reduction="mean", param=0.0):
        return fiamma.fused.loss(name, x, t, weight, pos_weight, reduction=reduction,
                                 param=param)
    return run


for _n in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "soft_margin_loss", "kl_div"):
    OPS[_n] = _loss_runner(_n)


def _nll_loss(x, t, weight=None, reduction="mean", ignore_index=-100):
    """core's one-op nll_loss (fiamma.fused.nll_loss), recorded as (input, target, weight)"""
    return fiamma.fused.nll_loss(x, t, weight, reduction=reduction, ignore_index=ignore_index)


OPS["nll_loss"] = _nll_loss


def _dropout(x, p=0.5, training=True):
    import fiamma.nn.functional as F

    return F.dropout(x, p, training)


# dropout in training mode (fiamma.export records it; a fresh mask each run)
OPS["dropout"] = _dropout

# core's fused cross entropy, recorded as (input, target, weight) with its keywords
OPS["cross_entropy_loss"] = fiamma.cross_entropy_loss
# torch.embedding's order: (weight, indices), padding_idx/scale_grad_by_freq/sparse as keywords
OPS["embedding"] = fiamma.embedding


def _resolve(x, env):
    if isinstance(x, Value):
        return env[x.name]
    if isinstance(x, (tuple, list)) and x:
        return type(x)(_resolve(y, env) for y in x)
    return x


def _copy(v):
    if isinstance(v, fiamma.Tensor):
        return v.clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_copy(x) for x in v)
    return v


def _collect(v, out):
    if isinstance(v, fiamma.Tensor):
        out.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _collect(x, out)


def runner(name):
    """The function that runs the op ``name`` of a graph (None if there is none): one of
    :data:`OPS`, or for ``ns::op.overload`` the fiamma.library operator of that name (looked up
    when the node runs, so a loaded graph may come before the program defines it)."""
    fn = OPS.get(name)
    if fn is None and "::" in name:
        qual, _, overload = name.rpartition(".")

        def fn(*args, **kwargs):
            ns, opname = qual.split("::")
            try:
                op = getattr(getattr(getattr(fiamma.ops, ns), opname), overload)
            except AttributeError:
                raise RuntimeError(f"fiamma.jit: the graph calls the operator {qual}, which is "
                                   "not defined in this process (define it with "
                                   "fiamma.library before running the graph)") from None
            # the trace recorded every positional argument, then the keyword-only ones
            args, kwargs = list(args), dict(kwargs)
            written = []
            for i, a in enumerate(op._schema.arguments):
                if a.is_write:  # into copies: the graph's values are not written
                    if i < len(args):
                        args[i] = _copy(args[i])
                        _collect(args[i], written)
                    elif a.name in kwargs:
                        kwargs[a.name] = _copy(kwargs[a.name])
                        _collect(kwargs[a.name], written)
            res = op(*args, **kwargs)
            if not written:
                return res
            _collect(res, written)
            return tuple(written) if len(written) > 1 else written[0]
    return fn


class Program:
    """A graph ready to run: each node's function looked up once."""

    def __init__(self, graph):
        self.graph = graph
        steps = []
        for n in graph.nodes:
            fn = runner(n.op)
            if fn is None:
                raise RuntimeError(
                    f"fiamma.jit: no runner for op '{n.op}' (node {n.outputs[0]}"
                    + (f", {n.source}" if n.source else "") + ")")
            kw = dict(n.kwargs)
            if n.op == "reshape" and "symsize" not in kw:
                src = n.args[0]
                ishape = graph.meta.get(src.name, ((),))[0] if isinstance(src, Value) else ()
                kw["arg"], kw["keep"] = dynamic_target(kw["arg"], ishape)
            plain = all(not isinstance(a, (tuple, list)) for a in n.args) and \
                all(not isinstance(v, (Value, tuple, list)) for v in kw.values())
            steps.append((fn, n.args, kw, n.outputs, plain, n))
        self.plain_steps = steps  # every op as traced: the differentiable path
        self.steps = self._reuse(graph, steps)
        self._params = None

    @staticmethod
    def _reuse(graph, steps):
        """Elementwise ops whose first operand dies there write into it (relu_, add_, ...):
        what an eager forward does with ``inplace=True`` and ``out += identity``, saving an
        allocation and a pass. Views alias their input (one root); only a value that is not
        itself a view (an expand has overlapping elements) is overwritten, and never a graph
        input, an initializer or a value whose memory is read later."""
        root, last = {}, {}
        for i, (_, _, _, outs, _, node) in enumerate(steps):
            ins = node.inputs()
            for v in ins:
                last[root.get(v, v)] = i
            for o in outs:
                root[o] = root.get(ins[0], ins[0]) if node.op in _ALIASING else o
        for o in graph.outputs:
            last[root.get(o, o)] = len(steps)
        fixed = set(graph.inputs) | set(graph.params)
        out = []
        for i, st in enumerate(steps):
            fn, args, kw, outs, plain, node = st
            a = args[0] if args else None
            if (node.op in _INPLACE and plain and isinstance(a, Value) and len(outs) == 1
                    and graph.meta.get(a.name) == graph.meta.get(outs[0])):
                r = root.get(a.name, a.name)
                others = [root.get(v, v) for v in node.inputs()[1:]]
                if r == a.name and r not in fixed and last.get(r) == i and r not in others:
                    st = (_INPLACE[node.op], args, kw, outs, plain, node)
            out.append(st)
        return out

    def _base(self, params):
        """The initializers plus the view steps that read only them (a weight's transpose):
        computed once; they are views, so in-place updates of the weights show through."""
        env = dict(params)
        steps = []
        for st in self.steps:
            fn, args, kw, outs, plain, node = st
            ins = node.inputs()
            # (not a view whose sizes follow an input's: ``w.expand(-1, x.shape[1], ...)``)
            if node.op in _VIEW_STEPS and ins and all(i in env for i in ins) and \
                    node.kwargs.get("symsize") is None:
                r = fn(*_resolve(args, env), **kw)
                if r._storage is env[ins[0]]._storage:  # a view: weight updates show through
                    env[outs[0]] = r
                    continue
            steps.append(st)
        return env, steps

    def run(self, inputs, params, kwargs=None):
        g = self.graph
        flat_call = len(inputs) == len(g.inputs) and \
            all(isinstance(x, fiamma.Tensor) for x in inputs)
        if kwargs or (g.kwarg_names and not flat_call):
            kwargs = kwargs or {}
            if set(kwargs) != set(g.kwarg_names):
                raise TypeError(f"traced function: keyword inputs {g.kwarg_names} were traced, "
                                f"got {list(kwargs)}")
            kwargs = {k: kwargs[k] for k in g.kwarg_names}  # the traced order
        if kwargs or not flat_call:
            from ._tracer import flat_inputs

            inputs = flat_inputs(inputs, kwargs)
        if len(inputs) != len(g.inputs):
            raise TypeError(f"traced function takes {len(g.inputs)} inputs, got {len(inputs)}")
        for x in inputs:
            if not isinstance(x, fiamma.Tensor):
                raise TypeError(f"traced function: inputs must be tensors, got "
                                f"{type(x).__name__}")
        if get_trace_hook() is not None or (fiamma.is_grad_enabled() and (
                any(x.requires_grad for x in inputs)
                or any(p.requires_grad for p in params.values()))):
            # a call whose result needs a graph (PyTorch's traced modules record autograd like
            # eager code), or inside another trace, which records these ops as its own (a
            # traced module called by a traced model is inlined, as in PyTorch): every op as
            # traced, none writing into a dying value, with grad on
            env, steps, grad = dict(params), self.plain_steps, True
        else:
            if self._params is not params:
                self._env, self._steps = self._base(params)
                self._params = params
            env, steps, grad = self._env.copy(), self._steps, False
        for name, x in zip(g.inputs, inputs):
            env[name] = x
        prev = set_grad_enabled_flag(grad)
        try:
            for fn, args, kw, outs, plain, node in steps:
                if plain:
                    r = fn(*[env[x.name] if x.__class__ is Value else x for x in args], **kw)
                else:
                    r = fn(*_resolve(args, env), **{k: _resolve(v, env) for k, v in kw.items()})
                if len(outs) == 1:
                    env[outs[0]] = r
                else:
                    for o, t in zip(outs, r):
                        env[o] = t
        finally:
            set_grad_enabled_flag(prev)
        return [env[o] for o in g.outputs]
