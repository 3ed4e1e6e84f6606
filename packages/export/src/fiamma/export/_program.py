"""``ExportedProgram``: an exported graph, its signature, its tensors, and the module it
runs as."""

import collections
import operator

import fiamma
import fiamma.fx as fx
from fiamma.fx.graph_module import _exec_forward
from fiamma.jit._graph import Value
from fiamma.jit._interp import OPS
from fiamma.jit._symbolic import evaluate

from . import _pytree
from ._dims import Range
from ._signature import InputKind, OutputKind

__all__ = ["ExportedProgram", "ExportOp", "ModuleCallEntry", "ModuleCallSignature", "CallSpec",
           "op"]

CallSpec = collections.namedtuple("CallSpec", ["in_spec", "out_spec"])
ModuleCallSignature = collections.namedtuple(
    "ModuleCallSignature", ["inputs", "outputs", "in_spec", "out_spec", "forward_arg_names"])
ModuleCallEntry = collections.namedtuple("ModuleCallEntry", ["fqn", "signature"])


class ExportOp:
    """An op of an exported graph (a node's ``target``): runs fiamma's op of that name (the
    table that ``fiamma.jit`` graphs run with); printed ``fiamma.export.ops.<name>``."""

    def __init__(self, name):
        if name not in OPS:
            raise RuntimeError(f"fiamma.export: unknown op {name!r}")
        self.name = self.__name__ = self.__qualname__ = name
        self.__module__ = "fiamma.export.ops"
        self._fn = OPS[name]

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"fiamma.export.ops.{self.name}"

    def __reduce__(self):
        return (op, (self.name,))


_OP_CACHE = {}


def op(name):
    """The :class:`ExportOp` called ``name`` (one object per name)."""
    o = _OP_CACHE.get(name)
    if o is None:
        o = _OP_CACHE[name] = ExportOp(name)
    return o


_DT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
       "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
       "bool": "b8", "complex64": "c64", "complex128": "c128"}


def _ann(meta):
    if meta is None:
        return None
    shape, dt = meta
    dims = ", ".join(d if isinstance(d, str) else str(d) for d in shape)
    return f'"{_DT.get(dt, dt)}[{dims}]"'


class ExportedProgram:
    """What :func:`fiamma.export.export` returns: ``graph_module`` / ``graph`` (every parameter,
    buffer and constant is a placeholder, before the user inputs), ``graph_signature``,
    ``state_dict`` (parameters and persistent buffers), ``constants``, ``range_constraints``,
    ``example_inputs``, ``module_call_graph``, ``call_spec``. Run it with ``.module()``;
    calling it directly raises, as in PyTorch."""

    def __init__(self, graph_module, graph_signature, state_dict, constants, range_constraints,
                 *, in_spec, out_spec, types=None, input_shapes=(), guards=(), symbols=None,
                 example_inputs=None, module_fqns=(), forward_arg_names=(), training=False):
        self._graph_module = graph_module
        self._graph_signature = graph_signature
        self._state_dict = state_dict
        self._constants = constants
        self._range_constraints = range_constraints
        self._in_spec, self._out_spec = in_spec, out_spec
        self._types = types or {}
        self._input_shapes = [list(s) for s in input_shapes]  # per user tensor input
        self._guards = list(guards)
        self._symbols = dict(symbols or {})
        self._example_inputs = example_inputs
        self._module_fqns = list(module_fqns)
        self._forward_arg_names = list(forward_arg_names)
        self._training = training
        self.verifiers = []
        self.dialect = "TRAINING"

    # ---- the pieces -------------------------------------------------------------------------
    @property
    def graph_module(self):
        return self._graph_module

    @property
    def graph(self):
        return self._graph_module.graph

    @property
    def graph_signature(self):
        return self._graph_signature

    @property
    def state_dict(self):
        return self._state_dict

    @property
    def constants(self):
        return self._constants

    @property
    def tensor_constants(self):
        return self._constants

    @property
    def range_constraints(self):
        return self._range_constraints

    @property
    def example_inputs(self):
        return self._example_inputs

    @example_inputs.setter
    def example_inputs(self, value):
        self._example_inputs = value

    @property
    def call_spec(self):
        return CallSpec(self._in_spec, self._out_spec)

    @property
    def module_call_graph(self):
        root = ModuleCallEntry("", ModuleCallSignature([], [], self._in_spec, self._out_spec,
                                                        list(self._forward_arg_names)))
        return [root] + [ModuleCallEntry(f, None) for f in self._module_fqns if f]

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def named_parameters(self):
        for name in self._graph_signature.parameters:
            yield name, self._state_dict[name]

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def named_buffers(self):
        for spec in self._graph_signature.input_specs:
            if spec.kind == InputKind.BUFFER:
                t = self._state_dict.get(spec.target)
                yield spec.target, t if t is not None else self._constants[spec.target]

    def _lifted_tensors(self):
        """Placeholder name -> tensor, for every non-user placeholder."""
        out = {}
        for s in self._graph_signature.input_specs:
            if s.kind == InputKind.USER_INPUT:
                continue
            t = self._state_dict.get(s.target)
            out[s.arg.name] = t if t is not None else self._constants[s.target]
        return out

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    # ---- running ----------------------------------------------------------------------------
    def module(self, check_guards=True):
        """A :class:`fiamma.fx.GraphModule` that takes the inputs ``mod`` took (same nesting,
        same keywords) and returns what it returned, with the parameters and buffers as its
        attributes (the program's own tensors: updates of a buffer the graph mutates, batch
        norm's running statistics in training mode, are written back into them). Its inputs
        are checked against the exported shapes (AssertionError ``Guard failed: ...``)."""
        return _unlift(self, check_guards)

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """A new ExportedProgram. fiamma's graph ops are already its primitive set (the ops
        its kernels implement, as ``fiamma.jit`` records them), so with no table the graph is
        copied unchanged. ``decomp_table`` maps an op (``fiamma.export.ops``'s
        :class:`ExportOp`, or its name) to a function: those nodes call it instead (such a
        program runs, but :func:`fiamma.export.save` can only store known ops)."""
        import copy

        gm = copy.deepcopy(self._graph_module)
        if decomp_table:
            table = {(k.name if isinstance(k, ExportOp) else k): v
                     for k, v in dict(decomp_table).items()}
            for n in gm.graph.nodes:
                if n.op == "call_function" and isinstance(n.target, ExportOp) and \
                        n.target.name in table:
                    n.target = table[n.target.name]
            gm.recompile()
        return self._with_graph_module(gm)

    def _with_graph_module(self, gm):
        ep = ExportedProgram.__new__(ExportedProgram)
        ep.__dict__.update(self.__dict__)
        ep._graph_module = gm
        return ep

    def validate(self):
        self.graph.lint()

    # ---- printing ---------------------------------------------------------------------------
    def _graph_text(self, indent="    "):
        lines = []
        sig = []
        for n in self.graph.nodes:
            if n.op == "placeholder":
                ann = _ann(n.meta.get("fiamma_shape"))
                sig.append(f"{n.name}: {ann}" if ann else n.name)
        lines.append("class GraphModule(fiamma.nn.Module):")
        lines.append(f"{indent}def forward(self, {', '.join(sig)}):")
        last = None
        for n in self.graph.nodes:
            if n.op == "placeholder":
                continue
            body = indent * 2
            if n.op == "output":
                lines.append(f"{body}return {_fmt(n.args[0])}")
                continue
            src = n.meta.get("stack_trace")
            if src and src != last:
                lines.append(f"{body}# File: {src}")
                last = src
            # intermediate shapes are the example's: shown only when every size is static
            ann = None if self._range_constraints else _ann(n.meta.get("fiamma_shape"))
            lhs = f"{n.name}: {ann}" if ann else n.name
            if n.target is operator.getitem:
                rhs = f"{_fmt(n.args[0])}[{_fmt(n.args[1])}]"
            else:
                args = [_fmt(a) for a in n.args] + [f"{k} = {_fmt(v)}"
                                                     for k, v in n.kwargs.items()]
                rhs = f"{n.target!r}({', '.join(args)})" if isinstance(n.target, ExportOp) \
                    else f"{getattr(n.target, '__name__', n.target)}({', '.join(args)})"
            lines.append(f"{body}{lhs} = {rhs}")
        return "\n".join(lines)

    def __str__(self):
        text = "ExportedProgram:\n" + _indent(self._graph_text(), "    ")
        text += "\n\nGraph signature:\n" + _indent(str(self._graph_signature), "    ")
        ranges = ", ".join(f"{s}: {r!r}" for s, r in self._range_constraints.items())
        text += f"\nRange constraints: {{{ranges}}}\n"
        return text

    def __repr__(self):
        return self.__str__()


def _indent(text, pad):
    return "\n".join(pad + line if line else line for line in text.split("\n"))


def _fmt(a):
    if isinstance(a, fx.Node):
        return a.name
    if isinstance(a, tuple):
        return "(" + ", ".join(_fmt(x) for x in a) + ("," if len(a) == 1 else "") + ")"
    if isinstance(a, list):
        return "[" + ", ".join(_fmt(x) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt(v)}" for k, v in a.items()) + "}"
    if isinstance(a, fiamma.dtype):
        return "fiamma." + str(a).split(".")[-1]
    return repr(a)


# ---- the runnable module ----------------------------------------------------------------------

class _ExportedModule(fx.GraphModule):
    """``ExportedProgram.module()``: a GraphModule whose generated code takes the flattened
    inputs; ``forward`` flattens, checks and unflattens around it."""

    def recompile(self):
        code = self.graph.python_code(root_module="self")
        self.__dict__["_code"] = code.src
        type(self)._flat_forward = _exec_forward(code.src, code.globals)
        return code

    def train(self, mode=True):
        # the graph was captured in one mode (batch norm's statistics, dropout): as PyTorch's
        raise NotImplementedError(f"Calling {'train' if mode else 'eval'}() is not supported "
                                  "yet. (The program runs as the module was exported: export "
                                  "it again in the other mode.)")

    def forward(self, *args, **kwargs):
        ep = self.__dict__["_ep"]
        flat = _flatten_call(ep, args, kwargs, self.__dict__.get("_check", True))
        outs = self._flat_forward(*flat)
        if not isinstance(outs, (tuple, list)):
            outs = (outs,)
        nmut = 0
        users = None
        apply = self.__dict__.get("_apply_mutations", True)
        with fiamma.no_grad():
            for s in ep.graph_signature.output_specs:
                if not apply and s.kind in (OutputKind.BUFFER_MUTATION,
                                            OutputKind.USER_INPUT_MUTATION):
                    nmut += 1
                    continue
                if s.kind == OutputKind.BUFFER_MUTATION:
                    _get(self, s.target).copy_(outs[nmut])
                    nmut += 1
                elif s.kind == OutputKind.USER_INPUT_MUTATION:
                    if users is None:
                        users = {i.arg.name: v for i, v in zip(
                            [i for i in ep.graph_signature.input_specs
                             if i.kind == InputKind.USER_INPUT], flat)}
                    users[s.target].copy_(outs[nmut])
                    nmut += 1
        return _pytree.unflatten(list(outs[nmut:]), ep._out_spec, ep._types)


def _get(mod, dotted):
    for part in dotted.split("."):
        mod = getattr(mod, part)
    return mod


def _unlift(ep, check_guards=True):
    g = fx.Graph()
    env = {}
    sig = {s.arg.name: s for s in ep.graph_signature.input_specs}
    root = {}
    buffers = {}
    for n in ep.graph.nodes:
        if n.op == "placeholder":
            s = sig[n.name]
            if s.kind == InputKind.USER_INPUT:
                new = g.placeholder(n.name)
            else:
                t = ep.state_dict.get(s.target)
                if t is None:
                    t = ep.constants[s.target]
                root[s.target] = t
                if s.kind == InputKind.BUFFER:
                    buffers[s.target] = s.persistent is not False
                new = g.get_attr(s.target)
        elif n.op == "output":
            g.output(fx.map_arg(n.args[0], lambda x: env[x]))
            continue
        else:
            new = g.node_copy(n, lambda x: env[x])
        new.meta = dict(n.meta)
        env[n] = new
    gm = _ExportedModule(root, g, "GraphModule")
    for target, persistent in buffers.items():
        *prefix, field = target.split(".")
        owner = _get(gm, ".".join(prefix)) if prefix else gm
        t = getattr(owner, field)
        if field in owner.__dict__:
            del owner.__dict__[field]
        owner.register_buffer(field, t, persistent=persistent)
    gm.__dict__["_ep"] = ep
    gm.__dict__["_check"] = check_guards
    gm.training = ep._training
    return gm


def _flatten_call(ep, args, kwargs, check):
    exp_kw = ep._in_spec[1][1][1]  # the keyword names of the export call
    if set(kwargs) != set(exp_kw):
        raise ValueError(f"Ran into a kwarg keyword mismatch: Got the following keywords "
                         f"{sorted(kwargs)} but expected {list(exp_kw)}")
    kwargs = {k: kwargs[k] for k in exp_kw}
    leaves, spec = _pytree.flatten((tuple(args), kwargs))
    if not _pytree.same_structure(spec, ep._in_spec):
        raise ValueError(f"Trying to flatten user inputs with exported input tree spec: "
                         f"{ep._in_spec} but actually got inputs with tree spec of: {spec}")
    if not check:
        return leaves
    names = [s.arg.name for s in ep.graph_signature.input_specs
             if s.kind == InputKind.USER_INPUT]
    tensors = []
    shapes = iter(ep._input_shapes)
    values = {}
    for name, v, s in zip(names, leaves, [s for s in ep.graph_signature.input_specs
                                          if s.kind == InputKind.USER_INPUT]):
        const = getattr(s.arg, "value", _NO) if hasattr(s.arg, "value") else _NO
        if const is not _NO:
            if isinstance(v, fiamma.Tensor) or v != const:
                raise AssertionError(f"Guard failed: {name} == {const!r} (the program was "
                                     f"exported with this constant input; got {v!r})")
            continue
        if not isinstance(v, fiamma.Tensor):
            raise AssertionError(f"Guard failed: {name} must be a tensor, got "
                                 f"{type(v).__name__}")
        shape = next(shapes)
        if v.dim() != len(shape):
            raise AssertionError(f"Guard failed: {name}.dim() == {len(shape)} (got a tensor "
                                 f"of shape {list(v.shape)})")
        for ax, (d, n) in enumerate(zip(shape, v.shape)):
            n = int(n)
            if isinstance(d, int):
                if n != d:
                    raise AssertionError(f"Guard failed: {name}.size()[{ax}] == {d} (got "
                                         f"shape {list(v.shape)})")
                continue
            sym, a, b = d
            if (n - b) % a:
                raise AssertionError(f"Guard failed: {name}.size()[{ax}] == "
                                     f"{_lin(ep, sym, a, b)} (got {n})")
            val = (n - b) // a
            r = ep.range_constraints[sym]
            label = ep._symbols.get(sym, sym)
            if val < r.lower:
                raise AssertionError(f"Guard failed: {name}.size()[{ax}] >= "
                                     f"{a * r.lower + b} ({label} in {r!r}; got {n})")
            if r.upper not in (None, float("inf")) and val > r.upper:
                raise AssertionError(f"Guard failed: {name}.size()[{ax}] <= "
                                     f"{a * r.upper + b} ({label} in {r!r}; got {n})")
            if sym in values and values[sym][0] != val:
                raise AssertionError(f"Guard failed: {name}.size()[{ax}] == "
                                     f"{_lin(ep, sym, a, b)} ({label} = {values[sym][0]} "
                                     f"from {values[sym][1]}; got {n})")
            values.setdefault(sym, (val, f"{name}.size()[{ax}]"))
        tensors.append(v)
    if ep._guards:
        env = {f"input_{i}": t for i, t in enumerate(tensors)}
        tnames = {f"input_{i}": n for i, n in enumerate(
            n for n, s in zip(names, [s for s in ep.graph_signature.input_specs
                                      if s.kind == InputKind.USER_INPUT])
            if not hasattr(s.arg, "value"))}
        for opname, lhs, rhs, result, where in ep._guards:
            got = getattr(operator, opname)(evaluate(_resolve(lhs, env)),
                                            evaluate(_resolve(rhs, env)))
            if got != result:
                cmp = _CMP[opname if result else _NOT[opname]]
                raise AssertionError(f"Guard failed: the program was exported under "
                                     f"{_expr_text(lhs, tnames)} {cmp} "
                                     f"{_expr_text(rhs, tnames)} (a size the model compared at "
                                     f"{where or 'export'}); these inputs break it")
    return leaves


_NO = object()
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_NOT = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def _lin(ep, sym, a, b):
    name = ep._symbols.get(sym, sym)
    s = name if a == 1 else f"{a}*{name}"
    return s + (f" + {b}" if b > 0 else f" - {-b}" if b < 0 else "")


def _resolve(e, env):
    if isinstance(e, Value):
        return env[e.name]
    if isinstance(e, tuple):
        return tuple(_resolve(x, env) for x in e)
    return e


def _expr_text(e, names=None):
    if isinstance(e, tuple):
        if e[0] == "dim":
            return f"{(names or {}).get(e[1].name, e[1].name)}.size()[{e[2]}]"
        if e[0] == "neg":
            return f"-{_expr_text(e[1], names)}"
        return f"{e[0]}({_expr_text(e[1], names)}, {_expr_text(e[2], names)})"
    return str(e)


def guards_inputs_only(guards, inputs):
    """The guards whose expressions read only graph inputs (the others follow from them)."""
    names = set(inputs)

    def ok(e):
        if isinstance(e, Value):
            return e.name in names
        if isinstance(e, tuple):
            return all(ok(x) for x in e)
        return True

    return [g for g in guards if ok(g[1]) and ok(g[2])]


__all__ += ["Range"]


def map_values(a, look):
    """``a`` (a node argument: a jit Value, or tuples/lists/dicts holding them, or a constant)
    with every Value replaced by ``look(value)``."""
    if isinstance(a, tuple):
        return tuple(map_values(x, look) for x in a)
    if isinstance(a, list):
        return [map_values(x, look) for x in a]
    if isinstance(a, dict):
        return {k: map_values(v, look) for k, v in a.items()}
    return look(a) if isinstance(a, Value) else a
