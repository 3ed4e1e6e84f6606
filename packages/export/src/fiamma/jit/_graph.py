"""The traced graph: values, nodes, initializers; its listing and its JSON form.

A value is named by a string: graph inputs ``input_0``..., initializers by their state_dict
key (parameters, buffers) or ``const_N`` (other tensors the trace met), node results ``%N``.
Node arguments keep the op's own positional arguments and keyword arguments, with every tensor
replaced by a :class:`Value` reference; everything else is a plain Python value (ints, floats,
bools, None, strings, tuples, lists, dtypes).
"""

import json

import fiamma

__all__ = ["Value", "Node", "Graph"]


class Value:
    """A reference to a graph value by name (a tensor argument of a node)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, Value) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class Node:
    """One op: ``outputs = op(*args, **kwargs)``; ``source`` is the model's line that ran it."""

    __slots__ = ("op", "args", "kwargs", "outputs", "source")

    def __init__(self, op, args, kwargs, outputs, source=""):
        self.op, self.args, self.kwargs = op, list(args), dict(kwargs)
        self.outputs, self.source = list(outputs), source

    def inputs(self):
        """The names of the values this node reads."""
        out = []
        _walk(self.args, out)
        _walk(list(self.kwargs.values()), out)
        return out

    def __repr__(self):
        parts = [_fmt(a) for a in self.args]
        parts += [f"{k}={_fmt(v)}" for k, v in self.kwargs.items()]
        lhs = ", ".join(self.outputs)
        src = f"  # {self.source}" if self.source else ""
        return f"{lhs} = {self.op}({', '.join(parts)}){src}"


def _walk(x, out):
    if isinstance(x, Value):
        out.append(x.name)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _walk(y, out)


def _fmt(x):
    if isinstance(x, fiamma.dtype):
        return "fiamma." + str(x).split(".")[-1]
    if isinstance(x, tuple):
        return "(" + ", ".join(_fmt(y) for y in x) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(y) for y in x) + "]"
    return repr(x)


class Graph:
    """A traced computation.

    ``inputs``: input value names; ``params``: name -> Tensor (initializers); ``nodes``: in run
    order; ``outputs``: output value names; ``out_spec``: how the outputs nest (tuple/list/dict
    structure with output positions as leaves); ``meta``: value name -> (shape, dtype name) as
    traced.
    """

    def __init__(self):
        self.inputs, self.nodes, self.outputs = [], [], []
        self.params = {}
        self.out_spec = 0
        self.kwarg_names = []   # keyword inputs of the trace, in the order of their tensors
        self.meta = {}

    def __repr__(self):
        lines = ["graph(" + ", ".join(
            f"{n}: {self._ty(n)}" for n in self.inputs + list(self.params)) + "):"]
        lines += ["  " + repr(n) for n in self.nodes]
        lines.append("  return (" + ", ".join(self.outputs) + ")")
        return "\n".join(lines)

    def _ty(self, name):
        m = self.meta.get(name)
        return f"{m[1]}{list(m[0])}" if m else "?"

    # ---- JSON ----
    def to_json(self):
        return json.dumps({
            "format": "fiamma.jit/1",
            "inputs": self.inputs, "outputs": self.outputs, "out_spec": _enc(self.out_spec),
            "kwarg_names": self.kwarg_names,
            "params": list(self.params),
            "meta": {k: [list(s), d] for k, (s, d) in self.meta.items()},
            "nodes": [{"op": n.op, "args": _enc(n.args), "kwargs": _enc(n.kwargs),
                       "outputs": n.outputs, "source": n.source} for n in self.nodes],
        })

    @classmethod
    def from_json(cls, text, params):
        d = json.loads(text)
        if d.get("format") != "fiamma.jit/1":
            raise RuntimeError(f"fiamma.jit.load: not a fiamma.jit graph (format "
                               f"{d.get('format')!r})")
        g = cls()
        g.inputs, g.outputs = list(d["inputs"]), list(d["outputs"])
        g.out_spec = _dec(d["out_spec"])
        g.kwarg_names = list(d.get("kwarg_names", []))
        g.meta = {k: (tuple(s), t) for k, (s, t) in d["meta"].items()}
        missing = [k for k in d["params"] if k not in params]
        if missing:
            raise RuntimeError(f"fiamma.jit.load: the file lacks tensors {missing[:5]}")
        g.params = {k: params[k] for k in d["params"]}
        g.nodes = [Node(n["op"], _dec(n["args"]), _dec(n["kwargs"]), n["outputs"], n["source"])
                   for n in d["nodes"]]
        return g


def _enc(x):
    if isinstance(x, Value):
        return {"$v": x.name}
    if isinstance(x, fiamma.dtype):
        return {"$dtype": str(x).split(".")[-1]}
    if isinstance(x, tuple):
        return {"$t": [_enc(y) for y in x]}
    if isinstance(x, list):
        return [_enc(y) for y in x]
    if isinstance(x, dict):
        return {"$d": [[k, _enc(v)] for k, v in x.items()]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"fiamma.jit: cannot store a {type(x).__name__} argument in a graph")


def _dec(x):
    if isinstance(x, list):
        return [_dec(y) for y in x]
    if isinstance(x, dict):
        if "$v" in x:
            return Value(x["$v"])
        if "$dtype" in x:
            dt = getattr(fiamma, x["$dtype"], None)
            if not isinstance(dt, fiamma.dtype):
                raise RuntimeError(f"fiamma.jit.load: unknown dtype {x['$dtype']!r}")
            return dt
        if "$t" in x:
            return tuple(_dec(y) for y in x["$t"])
        if "$d" in x:
            return {k: _dec(v) for k, v in x["$d"]}
        raise RuntimeError(f"fiamma.jit.load: malformed graph entry {x!r}")
    return x
