"""``export``: trace a module with fiamma.jit's tracer into an fx graph with lifted state."""

import keyword
import operator
import warnings

import fiamma
import fiamma.fx as fx
import fiamma.nn as nn
from fiamma import Tensor, autograd_hook
from fiamma.jit._errors import TracerWarning
from fiamma.jit._graph import Value
from fiamma.jit._tracer import trace_graph
from fiamma.jit._views import dynamic_target

from . import _pytree
from ._dims import _arg_names, resolve_dynamic_shapes
from ._errors import ConstraintViolationError, DataDependentError, UserError
from ._program import ExportedProgram, guards_inputs_only, map_values, op
from ._signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

__all__ = ["export", "draft_export"]


_READS = {"__bool__": "a tensor used as a Python bool: data-dependent control flow",
          "item": ".item()", "tolist": ".tolist()", "__int__": "int(tensor)",
          "__float__": "float(tensor)", "__index__": "a tensor used as an index",
          "numpy": ".numpy()"}


class _ExportState:
    """What fiamma.jit's tracer reports to an export: value read-backs (errors), size
    comparisons (guards), buffer updates (batch norm's running statistics)."""

    def __init__(self, names):
        self.names = names
        self.guards = []
        self.mutations = {}
        self.draft = None  # a list: draft_export records problems instead of raising

    def readback(self, what, where):
        what = _READS.get(what, what)
        msg = (f"fiamma.export: the model's code reads the value of a tensor the graph "
               f"computes ({what}) at {where}. Data-dependent control flow and value "
               "reads can't be captured in the graph: "
               "use fiamma.cond(pred, true_fn, false_fn, operands) for a branch on a tensor, "
               "fiamma.where to choose between values, or pass the value as a non-tensor "
               "input")
        if self.draft is not None:
            self.draft.append(msg)
            return
        raise DataDependentError(msg)

    def guard(self, opname, lhs, rhs, result, baked=None):
        self.guards.append((opname, lhs, rhs, result, baked))


def _patch_batch_norm(state, fqns):
    """Batch norm in training mode: its running statistics are recorded as graph outputs
    (BUFFER_MUTATION) instead of updated in place (the example run changes no buffer)."""
    import fiamma.nn.functional as F
    from fiamma.nn.modules import batchnorm as bnmod

    orig = bnmod._BatchNorm.forward

    def forward(self, input):
        tr = autograd_hook.get_trace_hook()
        if tr is None or id(input) not in getattr(tr, "vals", {}):
            return orig(self, input)  # another thread, or an input the export does not trace
        if not self.training and self.running_mean is not None and \
                self.running_var is not None:
            # inference: written out so that the graph reads the running statistics (the
            # fused kernel's recorded form holds 1/sqrt(var + eps) as a constant)
            self._check_input_dim(input)
            shape = [1, -1] + [1] * (input.dim() - 2)
            scale = (self.running_var + self.eps).rsqrt()
            if self.weight is not None:
                scale = scale * self.weight
            y = (input - self.running_mean.reshape(shape)) * scale.reshape(shape)
            return y if self.bias is None else y + self.bias.reshape(shape)
        if not (self.training and self.track_running_stats and self.running_mean is not None):
            return orig(self, input)
        self._check_input_dim(input)
        prefix = fqns.get(id(self))
        if prefix is None:
            raise UserError("fiamma.export: a batch norm layer in training mode that is not a "
                            "submodule of the exported module")
        prefix = prefix + "." if prefix else ""
        dims = [0] + list(range(2, input.dim()))
        mean = input.mean(dims)
        var = input.var(dims, correction=1)
        nbt = self.num_batches_tracked + 1
        if self.momentum is None:
            factor = 1.0 / nbt.to(mean.dtype)
            keep = 1.0 - factor
        else:
            factor, keep = self.momentum, 1.0 - self.momentum
        state.mutations[prefix + "running_mean"] = \
            (self.running_mean * keep + mean * factor).to(self.running_mean.dtype)
        state.mutations[prefix + "running_var"] = \
            (self.running_var * keep + var * factor).to(self.running_var.dtype)
        state.mutations[prefix + "num_batches_tracked"] = nbt
        return F.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)

    bnmod._BatchNorm.forward = forward
    return lambda: setattr(bnmod._BatchNorm, "forward", orig)


def _patch_instance_norm(state, fqns):
    """Instance norm written out with the sizes it is given (core's fused op reshapes with the
    example's batch size); in training mode with running statistics their update is recorded
    as BUFFER_MUTATION outputs, as for batch norm."""
    from fiamma import autograd_hook
    from fiamma.nn.modules import instancenorm as inmod

    orig = inmod._InstanceNorm.forward

    def forward(self, input):
        tr = autograd_hook.get_trace_hook()
        if tr is None or id(input) not in getattr(tr, "vals", {}):
            return orig(self, input)
        self._check_input_dim(input)
        fdim = input.dim() - self._no_batch_dim
        if input.shape[fdim] != self.num_features and self.affine:
            return orig(self, input)  # its error
        x = input.unsqueeze(0) if input.dim() == self._no_batch_dim else input
        dims = list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training or not self.track_running_stats:
            mean = x.mean(dims, keepdim=True)
            var = x.var(dims, keepdim=True, correction=0)
            y = (x - mean) * (var + self.eps).rsqrt()
            if self.training and self.track_running_stats and self.running_mean is not None:
                prefix = fqns.get(id(self), "")
                prefix = prefix + "." if prefix else ""
                f = self.momentum if self.momentum is not None else 0.0
                m_b = x.mean(dims).mean(0)
                v_b = x.var(dims, correction=1).mean(0)
                state.mutations[prefix + "running_mean"] = \
                    (self.running_mean * (1.0 - f) + m_b * f).to(self.running_mean.dtype)
                state.mutations[prefix + "running_var"] = \
                    (self.running_var * (1.0 - f) + v_b * f).to(self.running_var.dtype)
        else:
            scale = (self.running_var + self.eps).rsqrt()
            y = (x - self.running_mean.reshape(shape)) * scale.reshape(shape)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        return y.squeeze(0) if x is not input else y

    inmod._InstanceNorm.forward = forward
    return lambda: setattr(inmod._InstanceNorm, "forward", orig)


def _patch_dropout():
    """Dropout in training mode as one ``dropout`` node (its mask is drawn on each run; the
    tracer refuses the in-place random fill eager dropout uses)."""
    import fiamma.nn.functional as F
    from fiamma import autograd_hook

    orig = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        tr = autograd_hook.get_trace_hook()
        if not training or p == 0.0 or tr is None or id(input) not in tr.vals or \
                input.is_nested:
            return orig(input, p, training, inplace)
        if p < 0.0 or p > 1.0:
            return orig(input, p, training, inplace)  # its error
        out = tr.leaf_op("dropout", lambda: orig(input, p, True, False), input)
        tr.g.nodes[-1].kwargs.update({"p": float(p), "training": True})
        return out

    F.dropout = dropout
    return lambda: setattr(F, "dropout", orig)


def _patch_range(mod):
    """``range(n)`` over a size in the model's own modules specialises the size (a guard
    ``n == value``): Python turns an int subclass into a loop count without calling into it,
    so without this a loop over a dynamic size would be baked in silently. Installed as the
    name ``range`` in the globals of the modules that define the model's classes (not
    fiamma's library modules), for the export only."""
    import builtins
    import sys

    from fiamma.jit._symbolic import SymInt, _warn_baked

    real = builtins.range

    def range(*args):
        for a in args:
            if isinstance(a, SymInt):
                _warn_baked("range() over a size", a)
        return real(*[int.__int__(a) if isinstance(a, SymInt) else a for a in args])

    done = []
    for m in mod.modules():
        name = type(m).__module__
        if name.startswith("fiamma.") and not name.startswith(("fiamma.vision",
                                                               "fiamma.audio")):
            continue
        g = getattr(sys.modules.get(name), "__dict__", None)
        if g is None or "range" in g or any(g is d for d in done):
            continue
        g["range"] = range
        done.append(g)

    def restore():
        for g in done:
            if g.get("range") is range:
                del g["range"]
    return restore


def _placeholder_name(prefix, path):
    """PyTorch's placeholder names: ``p_``/``b_``/``c_`` + the dotted path with dots as
    underscores, lower-cased, a leading ``self_`` dropped (``self_attn.in_proj_weight`` ->
    ``p_attn_in_proj_weight``)."""
    name = "_".join(str(p) for p in path).replace(".", "_").lower()
    if name.startswith("self_"):
        name = name[5:]
    return prefix + name


def _user_names(arg_names, paths):
    """Placeholder names of the user inputs: the argument's name, then the positions and
    keys inside it (``x``, ``hc_0``, ``hc_1``), as PyTorch names them."""
    out = []
    for path in paths:
        top = arg_names[path[1]] if path[0] == 0 else str(path[1])
        out.append("_".join([top] + [str(p) for p in path[2:]]))
    return out


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False,
           preserve_module_call_signature=(), prefer_deferred_runtime_asserts_over_guards=False):
    """Capture ``mod(*args, **kwargs)`` as an :class:`ExportedProgram` (PyTorch's
    ``torch.export.export``).

    The module runs once on the example inputs under fiamma.jit's tracer: every op on the
    inputs, parameters and buffers becomes a node; Python control flow on sizes is
    specialised (a comparison of a dynamic size becomes a guard the program checks on each
    call); control flow on tensor values raises :class:`DataDependentError` (use
    :func:`fiamma.cond`). ``dynamic_shapes`` (dict by argument name, or tuple by position;
    per tensor a dict ``{dim: Dim}`` or a tuple of Dims/None; nested like the inputs) says
    which sizes may change. ``strict`` is accepted (fiamma always traces the Python code as
    it runs, like PyTorch's non-strict mode); ``preserve_module_call_signature`` is accepted
    and has no effect (the graph is flat).

    >>> import fiamma, fiamma.nn as nn
    >>> from fiamma.export import export, Dim
    >>> m = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    >>> ep = export(m, (fiamma.randn(8, 4),), dynamic_shapes=({0: Dim("batch")},))
    >>> ep.graph_signature.user_inputs
    ('input',)
    >>> ep.module()(fiamma.randn(5, 4)).shape
    fiamma.Size([5, 3])
    """
    return _export(mod, args, kwargs, dynamic_shapes, None)


def draft_export(mod, args, kwargs=None, *, dynamic_shapes=None,
                 preserve_module_call_signature=(), strict=False,
                 prefer_deferred_runtime_asserts_over_guards=False):
    """:func:`export` that records problems instead of raising where it can: value reads
    are baked in at the example's values (as fiamma.jit.trace does) and dynamic sizes the
    model specialises become static. The program's ``_report`` lists what was found
    (``ep._report.failures``); it is correct for the example's values only where a value
    read was baked in."""
    report = []
    ep = _export(mod, args, kwargs, dynamic_shapes, report)
    ep._report = _DraftReport(report)
    return ep


class _DraftReport:
    def __init__(self, failures):
        self.failures = failures

    def successful(self):
        return not self.failures

    def __str__(self):
        if not self.failures:
            return "No issues found."
        return "\n".join(f"{i + 1}. {f}" for i, f in enumerate(self.failures))


def _export(mod, args, kwargs, dynamic_shapes, draft):
    if not isinstance(mod, nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got "
                         f"{type(mod)}.")
    if not isinstance(args, tuple):
        raise UserError(f"Expecting `args` to be a tuple of example positional inputs, got "
                        f"{type(args)}")
    kwargs = dict(kwargs or {})
    types = {}
    leaves, in_spec = _pytree.flatten((args, kwargs), types)
    paths = _pytree.leaf_paths(in_spec)
    tensor_pos = [i for i, v in enumerate(leaves) if isinstance(v, Tensor)]
    tensors = [leaves[i] for i in tensor_pos]
    if len({id(t) for t in tensors}) != len(tensors):
        raise UserError("fiamma.export: the same tensor is given as two inputs; pass a "
                        "clone for the second")
    shapes, ranges, decl, symbols = resolve_dynamic_shapes(mod, args, kwargs, dynamic_shapes,
                                                           tensors)

    # names of every tensor the module holds
    fqns = {id(m): name for name, m in mod.named_modules()}
    params = dict(mod.named_parameters())
    buffers = dict(mod.named_buffers())
    persistent = set(mod.state_dict(keep_vars=True))
    names = {}
    for k, t in list(params.items()) + list(buffers.items()):
        names.setdefault(id(t), k)
    for mname, m in mod.named_modules():
        for attr, v in vars(m).items():
            if isinstance(v, Tensor) and not isinstance(v, nn.Parameter) and \
                    id(v) not in names:
                names[id(v)] = f"{mname}.{attr}" if mname else attr
    state = _ExportState(names)
    state.draft = draft

    def fn(*flat):
        lv = list(leaves)
        for i, t in zip(tensor_pos, flat):
            lv[i] = t
        a, k = _pytree.unflatten(lv, in_spec, types)
        state.mutations.clear()
        out = mod(*a, **k)
        # buffers and inputs the model wrote in place (the tracer rebound them to the new
        # value): BUFFER_MUTATION / USER_INPUT_MUTATION outputs, as PyTorch's functional form
        tr = autograd_hook.get_trace_hook()
        specs = [("BUFFER_MUTATION", t) for t in state.mutations]
        values = list(state.mutations.values())
        for target, b in buffers.items():
            cur = tr.vals.get(id(b))
            if target not in state.mutations and cur is not None and cur != target and \
                    id(b) not in written:
                written[id(b)] = b
                specs.append(("BUFFER_MUTATION", target))
                values.append(b)
        for i, t in enumerate(flat):
            if tr.vals.get(id(t)) not in (None, f"input_{i}"):
                written[id(t)] = t
                specs.append(("USER_INPUT_MUTATION", i))
                values.append(t)
        state.mutation_specs = specs
        return {"out": out, "mut": values}

    written = {}
    before = {id(t): t.detach().clone() for t in list(buffers.values()) + tensors}

    restores = [_patch_batch_norm(state, fqns), _patch_instance_norm(state, fqns),
                _patch_dropout(), _patch_range(mod)]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TracerWarning)
            g, result = trace_graph(fn, tuple(tensors), mod, export=state)
    finally:
        for restore in restores:
            restore()
        with fiamma.no_grad():  # the example run leaves the module and the inputs as they were
            for key, t in written.items():
                t.copy_(before[key])
        before.clear()
    for w in caught:
        if issubclass(w.category, TracerWarning):
            if draft is not None:
                draft.append(str(w.message))
                continue
            raise UserError(f"fiamma.export: {w.message}")
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    mutated = list(getattr(state, "mutation_specs", []))
    user_out = result["out"]
    out_leaves, out_spec = _pytree.flatten(user_out, types)
    for v in out_leaves:
        if not isinstance(v, Tensor):
            raise UserError(f"fiamma.export: outputs must be tensors (in tuples, lists, dicts), "
                            f"got a {type(v).__name__}")

    arg_names = _arg_names(mod, args, kwargs)
    tensor_names = [n for n, v in zip(_user_names(arg_names, paths), leaves)
                    if isinstance(v, Tensor)]
    guards = _check_guards(state.guards, g.inputs, shapes, ranges, decl, symbols, draft,
                           dict(zip(g.inputs, tensor_names)))
    # sizes the code specialised (Dim.AUTO, draft_export) are static, as in PyTorch
    for shape in shapes:
        for i, d in enumerate(shape):
            if not isinstance(d, int) and ranges[d[0]].lower == ranges[d[0]].upper:
                shape[i] = d[1] * ranges[d[0]].lower + d[2]
    for sym in [k for k, r in ranges.items() if r.lower == r.upper]:
        del ranges[sym]
    ep = _build(mod, g, leaves, tensor_pos, paths, arg_names, shapes, params, buffers,
                persistent, mutated, len(out_leaves))
    gm, sig, state_dict, constants = ep
    forward_names = arg_names
    return ExportedProgram(
        gm, sig, state_dict, constants, ranges, in_spec=in_spec, out_spec=out_spec,
        types=types, input_shapes=shapes, guards=guards, symbols=symbols,
        example_inputs=(args, kwargs), module_fqns=[n for n, _ in mod.named_modules()],
        forward_arg_names=forward_names, training=mod.training)


def _dims_of(shapes, inputs):
    """input value name -> its dims as declared."""
    return dict(zip(inputs, shapes))


def _check_guards(guards, inputs, shapes, ranges, decl, symbols, draft, names=None):
    """Specialisations and range refinements of dynamic sizes (named Dims the code narrows
    are reported together, with the fixes, as PyTorch does); the guards to check on each
    call (those that read a dynamic input size)."""
    dims = _dims_of(shapes, inputs)
    declared = {s: (r.lower, r.upper) for s, r in ranges.items()}
    problems, fixes, narrowed = [], [], []

    def dyn(e):
        if isinstance(e, tuple):
            if e[0] == "dim" and isinstance(e[1], Value):
                d = dims.get(e[1].name)
                return d is not None and not isinstance(d[e[2]], int)
            return any(dyn(x) for x in e[1:])
        return False

    def bare_dim(e):
        if isinstance(e, tuple) and e[0] == "dim" and isinstance(e[1], Value) and \
                e[1].name in dims and not isinstance(dims[e[1].name][e[2]], int):
            return dims[e[1].name][e[2]]
        return None

    kept = []
    for opname, lhs, rhs, result, where in guards:
        if not (dyn(lhs) or dyn(rhs)):
            continue
        at = f" (at {where})" if where else ""
        cmp = opname if result else {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt",
                                     "eq": "ne", "ne": "eq"}[opname]
        d1, d2 = bare_dim(lhs), bare_dim(rhs)
        if d1 is not None and d2 is not None and cmp == "eq" and d1[0] != d2[0] and \
                list(d1[1:]) == [1, 0] == list(d2[1:]):
            k1, n1 = decl[d1[0]]
            k2, n2 = decl[d2[0]]
            if k1 == k2 == "named":
                problems.append(f"The values of {n2} and {n1} must always be equal{at}.")
                fixes.append(f"{n2} = {n1}")
            kept.append((opname, lhs, rhs, result, where))
            continue
        if d1 is not None and isinstance(rhs, int):
            sym, a, b = d1
            kind, dname = decl[sym]
            label = dname or sym
            r = ranges[sym]
            # the guard on n = a * sym + b, as a range of sym (a > 0)
            if cmp == "eq":
                if (rhs - b) % a == 0:
                    v = (rhs - b) // a
                    if kind != "AUTO":
                        problems.append(f"You marked {label} as dynamic but your code "
                                        f"specialized it to be a constant ({v}){at}. Use "
                                        "Dim.STATIC (or Dim.AUTO) for it, or change the code.")
                        fixes.append(f"{label} = {v}")
                    r.lower = r.upper = v
                kept.append((opname, lhs, rhs, result, where))
                continue
            if cmp in ("gt", "ge"):
                new_lo = -(-(rhs + (1 if cmp == "gt" else 0) - b) // a)
                if new_lo > r.lower:
                    r.lower = new_lo
                    narrowed.append((sym, label, kind,
                                     f"{_expr_text(lhs, names)} {_CMP[cmp]} {rhs}", at))
                continue
            if cmp in ("lt", "le"):
                new_hi = (rhs - (1 if cmp == "lt" else 0) - b) // a
                if r.upper in (None, float("inf")) or new_hi < r.upper:
                    r.upper = new_hi
                    narrowed.append((sym, label, kind,
                                     f"{_expr_text(lhs, names)} {_CMP[cmp]} {rhs}", at))
                continue
        kept.append((opname, lhs, rhs, result, where))
    done = set()
    for sym, label, kind, text, at in narrowed:
        if kind != "named":
            continue  # Dim.AUTO / Dim.DYNAMIC: the range is refined
        lo0, hi0 = declared[sym]
        problems.append(f"Not all values of {label} in the specified range "
                        f"{_range_text(lo0, hi0)} satisfy the generated guard {text}{at}.")
        if sym not in done:
            done.add(sym)
            r = ranges[sym]
            parts = ([f"min={r.lower}"] if r.lower != max(lo0, 2) or lo0 > 2 else []) + \
                ([f"max={r.upper}"] if r.upper not in (None, float("inf")) else [])
            fixes.append(f"{label} = Dim({label!r}" + "".join(", " + p for p in parts) + ")")
    if problems:
        labels = sorted({p for p in (decl[s][1] for s in decl) if p and any(
            p in q for q in problems)})
        msg = (f"Constraints violated ({', '.join(labels)})!\n"
               + "\n".join(f"  - {p}" for p in problems)
               + ("\nSuggested fixes:\n" + "\n".join(f"  {f}" for f in fixes) if fixes else ""))
        if draft is None:
            raise ConstraintViolationError(msg)
        draft.append(msg)
    return guards_inputs_only(kept, inputs)


_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _range_text(lo, hi):
    return f"[{lo}, {'int_oo' if hi in (None, float('inf')) else hi}]"


def _expr_text(e, names=None):
    if isinstance(e, tuple) and e[0] == "dim":
        return f"{(names or {}).get(e[1].name, e[1].name)}.size()[{e[2]}]"
    return str(e)


def _sym_shape(shape):
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        else:
            sym, a, b = d
            s = sym if a == 1 else f"{a}*{sym}"
            out.append(s + (f" + {b}" if b > 0 else f" - {-b}" if b < 0 else ""))
    return out


def _build(mod, g, leaves, tensor_pos, paths, arg_names, shapes, params, buffers, persistent,
           mutated, n_user_out):
    """The fx graph (lifted: parameters, buffers and constants are placeholders), its
    signature, state_dict and constants."""
    fxg = fx.Graph()
    env = {}
    specs = []
    state_dict, constants = {}, {}
    by_id = {}

    def meta(node, shape, dtype):
        node.meta["fiamma_shape"] = (list(shape), dtype)

    for k, p in params.items():
        if k not in g.params:
            continue
        n = fxg.placeholder(_placeholder_name("p_", [k]))
        meta(n, p.shape, p.dtype.name)
        env[k] = n
        specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(n.name), k))
        state_dict[k] = p
        by_id[id(p)] = k
    for k, b in buffers.items():
        if k not in g.params:
            continue
        n = fxg.placeholder(_placeholder_name("b_", [k]))
        meta(n, b.shape, b.dtype.name)
        env[k] = n
        keep = k in persistent
        specs.append(InputSpec(InputKind.BUFFER, TensorArgument(n.name), k, keep))
        (state_dict if keep else constants)[k] = b
    lifted = 0
    for k, t in g.params.items():
        if k in env:
            continue
        target = k
        if k.startswith("const_"):
            target = f"lifted_tensor_{lifted}"
            lifted += 1
        n = fxg.placeholder(_placeholder_name("c_", [target]))
        meta(n, t.shape, t.dtype.name)
        env[k] = n
        specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(n.name), target))
        constants[target] = t
    user_names = _user_names(arg_names, paths)
    ti = 0
    taken = {n.name for n in fxg.nodes}
    for i, (name, v) in enumerate(zip(user_names, leaves)):
        n = fxg.placeholder(name)
        if n.name != name and name.isidentifier() and not keyword.iskeyword(name) and \
                name not in taken:
            # PyTorch keeps an argument's own name (``input``) though fx avoids builtins
            n.name = name
            fxg._graph_namespace._used.add(name)
        taken.add(n.name)
        if isinstance(v, Tensor):
            env[g.inputs[ti]] = n
            n.meta["fiamma_shape"] = (_sym_shape(shapes[ti]), v.dtype.name)
            specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(n.name), None))
            ti += 1
        else:
            specs.append(InputSpec(InputKind.USER_INPUT, ConstantArgument(n.name, v), None))

    def res(a):
        return map_values(a, lambda v: env[v.name])

    for jn in g.nodes:
        kw = dict(jn.kwargs)
        if jn.op == "reshape" and "symsize" not in kw:
            src = jn.args[0]
            ishape = g.meta.get(src.name, ((),))[0] if isinstance(src, Value) else ()
            kw["arg"], kw["keep"] = dynamic_target(kw["arg"], ishape)
        node = fxg.call_function(op(jn.op), res(tuple(jn.args)), res(kw))
        if jn.source and not jn.source.startswith("<fiamma"):
            node.meta["stack_trace"] = jn.source
        if len(jn.outputs) == 1:
            env[jn.outputs[0]] = node
            m = g.meta.get(jn.outputs[0])
            if m:
                meta(node, m[0], m[1])
        else:
            for i, o in enumerate(jn.outputs):
                gi = fxg.call_function(operator.getitem, (node, i))
                m = g.meta.get(o)
                if m:
                    meta(gi, m[0], m[1])
                env[o] = gi
    outs = [env[o] for o in g.outputs]
    user, muts = outs[:n_user_out], outs[n_user_out:]
    out_specs = []
    tensor_user = [name for name, v in zip(user_names, leaves) if isinstance(v, Tensor)]
    for (kind, target), n in zip(mutated, muts):
        if kind == "USER_INPUT_MUTATION":
            target = tensor_user[target]
        out_specs.append(OutputSpec(OutputKind[kind], TensorArgument(n.name), target))
    for n in user:
        out_specs.append(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(n.name), None))
    fxg.output(tuple(muts + user))
    gm = fx.GraphModule({}, fxg, "GraphModule")
    return gm, ExportGraphSignature(specs, out_specs), state_dict, constants
