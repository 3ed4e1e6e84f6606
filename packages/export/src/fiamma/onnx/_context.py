"""The state of one ONNX export: nodes, initializers, names, traced shapes and dtypes."""

import numpy as np

from fiamma.jit import Value

_NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
       "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
       "uint8": np.uint8, "bool": np.bool_, "complex64": np.complex64,
       "complex128": np.complex128}


class UnsupportedOpError(RuntimeError):
    """An op of the traced graph has no ONNX converter (or not for these arguments)."""


class Context:
    def __init__(self, onnx, graph, opset, consts):
        self.onnx, self.helper = onnx, onnx.helper
        self.graph, self.opset = graph, opset
        self.consts = consts            # value name -> NumPy array (initializers)
        self.nodes = []
        self.names = {}                 # graph value name -> ONNX name
        self.n = 0
        self.node = None                # the traced node being converted (for errors)
        self.pairs = set()              # values in the complex pair layout (fft results)
        self.dynamic = False            # dynamic axes asked for: symbolic sizes stay symbolic
        self._shapes = {}

    # ---- names ----
    def fresh(self, hint="t"):
        self.n += 1
        return f"{hint}_{self.n}"

    def name(self, v):
        if isinstance(v, Value):
            v = v.name
        if v not in self.names:
            self.names[v] = "v" + v[1:] if v.startswith("%") else v
        return self.names[v]

    def meta(self, v):
        return self.graph.meta[v.name if isinstance(v, Value) else v]

    def shape(self, v):
        return tuple(self.meta(v)[0])

    def np_dtype(self, v):
        return np.dtype(_NP[self.meta(v)[1]])

    def rank(self, v):
        return len(self.shape(v))

    def is_const(self, v):
        return isinstance(v, Value) and v.name in self.consts

    def value(self, v):
        return self.consts[v.name]

    # ---- building ----
    def add(self, op_type, inputs, outputs=None, **attrs):
        if outputs is None:
            outputs = [self.fresh(op_type.lower())]
        elif isinstance(outputs, str):
            outputs = [outputs]
        ins = [i if isinstance(i, str) else ("" if i is None else self.name(i)) for i in inputs]
        src = self.node.source if self.node is not None else ""
        self.nodes.append(self.helper.make_node(op_type, ins, list(outputs),
                                                name=self.fresh(op_type), doc_string=src,
                                                **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, array, hint="c"):
        name = self.fresh(hint)
        self.consts[name] = np.asarray(array)
        return name

    def ints(self, values):
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def scalar_like(self, x, value, dtype=None):
        dt = dtype if dtype is not None else self.np_dtype(x)
        return self.const(np.asarray(value, dtype=dt), "scalar")

    def shape_of(self, v):
        """The ONNX Shape of value ``v`` (one node per value)."""
        key = v.name if isinstance(v, Value) else v
        if key not in self._shapes:
            self._shapes[key] = self.add("Shape", [v])
        return self._shapes[key]

    def unsupported(self, what):
        n = self.node
        where = f" at {n.source}" if n is not None and n.source else ""
        raise UnsupportedOpError(f"fiamma.onnx.export: {what}{where}")
