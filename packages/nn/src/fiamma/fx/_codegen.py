"""Python source for a Graph: the ``forward`` a GraphModule runs (``Graph.python_code``)."""

import builtins
import keyword
import math
import operator
import re
import sys

from .node import Node

# where a function's public name is looked for first (printed as `fiamma.relu(x)`)
_PUBLIC_MODULES = ("fiamma", "fiamma.nn.functional", "fiamma.linalg", "fiamma.special",
                   "fiamma.fft", "math", "operator")

_ILLEGAL = set(keyword.kwlist) | set(dir(builtins)) | {"inf", "nan", "NoneType", "self"}

BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
          operator.floordiv: "//", operator.mod: "%", operator.pow: "**",
          operator.matmul: "@", operator.lshift: "<<", operator.rshift: ">>",
          operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.eq: "==",
          operator.ne: "!=", operator.lt: "<", operator.le: "<=", operator.gt: ">",
          operator.ge: ">="}
UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}


def public_module_of(fn):
    """The first of fiamma's public modules (then ``fn.__module__``) holding ``fn`` under its
    ``__name__``, or None."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return None
    for mod in _PUBLIC_MODULES:
        m = sys.modules.get(mod)
        if m is not None and _unwrapped(m.__dict__.get(name)) is fn:
            return mod
    return None


def _op_path(fn):
    """``ops.ns.name.overload`` of a fiamma.library operator (None for anything else)."""
    path = getattr(fn, "_fx_expr", None)
    if isinstance(path, str) and type(fn).__module__.startswith("fiamma.library"):
        return path
    return None


def _unwrapped(f):
    # a function the tracer patched while a trace runs stands for its original
    return getattr(f, "__fx_original__", f)


class Namespace:
    """Unique, legal Python names: ``add``, ``add_1``, ...; ``sum`` -> ``sum_1``."""

    def __init__(self):
        self._used = set()
        self._obj_to_name = {}

    def create_name(self, candidate, obj=None):
        if obj is not None and id(obj) in self._obj_to_name:
            return self._obj_to_name[id(obj)][1]
        candidate = re.sub(r"[^0-9a-zA-Z_]+", "_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = "_" + candidate
        m = re.match(r"(.*)_(\d+)$", candidate)
        base, num = (m.group(1), int(m.group(2))) if m else (candidate, None)
        while candidate in self._used or candidate in _ILLEGAL:
            num = 1 if num is None else num + 1
            candidate = f"{base}_{num}"
        self._used.add(candidate)
        if obj is not None:
            self._obj_to_name[id(obj)] = (obj, candidate)  # keeps obj alive with its id
        return candidate

    def associate_name_with_obj(self, name, obj):
        self._obj_to_name[id(obj)] = (obj, name)

    def free(self, name):
        self._used.discard(name)

    def copy(self):
        ns = Namespace()
        ns._used = set(self._used)
        return ns


class PythonCode:
    """Generated source (``src``) and the globals it must run with (``globals``)."""

    def __init__(self, src, globals_):
        self.src = src
        self.globals = globals_


def _is_ident(s):
    return isinstance(s, str) and s.isidentifier() and not keyword.iskeyword(s)


def attr_path(root, dotted):
    """``self.a.b`` for ``a.b``; ``getattr(self.layer1, "0").conv`` for parts that are not
    identifiers."""
    expr = root
    for part in dotted.split("."):
        if _is_ident(part):
            expr = f"{expr}.{part}"
        else:
            quoted = f'"{part}"' if '"' not in part and "\\" not in part else repr(part)
            expr = f"getattr({expr}, {quoted})"
    return expr


class _Emitter:
    def __init__(self, graph, root_module):
        self.graph = graph
        self.root = root_module
        self.ns = Namespace()
        for n in graph.nodes:
            self.ns._used.add(n.name)
        self.ns._used.add(root_module)
        self.globals = {}

    def add_global(self, hint, obj):
        if id(obj) in self.ns._obj_to_name:
            return self.ns._obj_to_name[id(obj)][1]
        if hint in self.globals and self.globals[hint] is obj:
            return hint
        if hint not in self.ns._used and hint not in _ILLEGAL and _is_ident(hint):
            self.ns._used.add(hint)
            self.ns.associate_name_with_obj(hint, obj)
            name = hint
        else:
            name = self.ns.create_name(hint, obj)
        self.globals[name] = obj
        return name

    def module_expr(self, modname):
        root, _, rest = modname.partition(".")
        name = self.add_global(root, sys.modules[root])
        return name + ("." + rest if rest else "")

    def fn_expr(self, fn):
        if getattr(fn, "__module__", None) == "builtins" and \
                getattr(builtins, fn.__name__, None) is fn:
            return fn.__name__
        mod = public_module_of(fn)
        if mod is not None:
            return f"{self.module_expr(mod)}.{fn.__name__}"
        path = _op_path(fn)
        if path is not None:  # a fiamma.library operator: fiamma.ops.<ns>.<name>.<overload>
            return f"{self.module_expr('fiamma')}.{path}"
        hint = getattr(fn, "__name__", None) or type(fn).__name__
        return self.add_global(hint if _is_ident(hint) else "fn", fn)

    def arg(self, a):
        if isinstance(a, Node):
            return a.name
        if a is None or type(a) in (bool, int, str, bytes):
            return repr(a)
        if type(a) is float:
            if math.isfinite(a):
                return repr(a)
            return f"float({str(a)!r})"
        if type(a) is complex and math.isfinite(a.real) and math.isfinite(a.imag):
            return repr(a)
        if a is Ellipsis:
            return "..."
        if type(a) is tuple:
            inner = ", ".join(self.arg(e) for e in a)
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            t = self.add_global(type(a).__name__, type(a))
            return f"{t}({', '.join(self.arg(e) for e in a)})"
        if type(a) is list:
            return "[" + ", ".join(self.arg(e) for e in a) + "]"
        if type(a) is dict:
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in a.items()) + "}"
        if type(a) is slice:
            return f"slice({self.arg(a.start)}, {self.arg(a.stop)}, {self.arg(a.step)})"
        if type(a) is range:
            return repr(a)
        fiamma = sys.modules.get("fiamma")
        if fiamma is not None and isinstance(a, fiamma.dtype):
            name = repr(a).rpartition(".")[2]
            if getattr(fiamma, name, None) is a:
                return f"{self.module_expr('fiamma')}.{name}"
        hint = getattr(a, "__name__", None)
        if not _is_ident(hint):
            hint = "_" + type(a).__name__.lower() + "_constant"
        return self.add_global(hint, a)

    def call_args(self, args, kwargs):
        parts = [self.arg(a) for a in args]
        parts += [f"{k} = {self.arg(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    def expr(self, n):
        op, t, args, kwargs = n.op, n.target, n.args, n.kwargs
        if op == "get_attr":
            return attr_path(self.root, t)
        if op == "call_module":
            return f"{attr_path(self.root, t)}({self.call_args(args, kwargs)})"
        if op == "call_method":
            if not args:
                raise RuntimeError(f"Graph.python_code: call_method node {n.name} has no self "
                                   "argument")
            obj = self.arg(args[0])
            return f"{obj}.{t}({self.call_args(args[1:], kwargs)})"
        # call_function
        if not kwargs:
            if t in BINARY and len(args) == 2:
                return f"{self.arg(args[0])} {BINARY[t]} {self.arg(args[1])}"
            if t in UNARY and len(args) == 1:
                return f"{UNARY[t]}{self.arg(args[0])}"
            if t is operator.getitem and len(args) == 2:
                return f"{self.arg(args[0])}[{self.arg(args[1])}]"
            if t is builtins.getattr and len(args) == 2 and _is_ident(args[1]):
                return f"{self.arg(args[0])}.{args[1]}"
        return f"{self.fn_expr(t)}({self.call_args(args, kwargs)})"

    def emit(self):
        nodes = list(self.graph.nodes)
        # free each value after its last use, as PyTorch's generated code does
        seen, frees = set(), {}
        for n in reversed(nodes):
            for inp in n.all_input_nodes:
                if inp not in seen:
                    seen.add(inp)
                    frees.setdefault(n, []).append(inp)
        params, body = [], []
        for n in nodes:
            if n.op == "placeholder":
                name = n.target if n.target.startswith("*") else n.name
                if n.target.startswith("*"):
                    star = "**" if n.target.startswith("**") else "*"
                    if n.name != n.target.lstrip("*"):
                        raise RuntimeError(f"Graph.python_code: placeholder {n.target} must be "
                                           f"named {n.target.lstrip('*')}, got {n.name}")
                    name = star + n.name
                params.append(f"{name} = {self.arg(n.args[0])}" if n.args else name)
                continue
            if n.op == "output":
                body.append(f"return {self.arg(n.args[0]) if n.args else 'None'}")
                continue
            line = f"{n.name} = {self.expr(n)}"
            dead = [d.name for d in frees.get(n, ())]
            if not n.users:
                dead.append(n.name)
            if dead:
                line += ";  " + " = ".join(dead) + " = None"
            body.append(line)
        if not body or not body[-1].startswith("return"):
            body.append("return None")
        sig = ", ".join([self.root] + params)
        src = f"\n\n\ndef forward({sig}):\n" + "".join(f"    {b}\n" for b in body) + "    "
        return PythonCode(src, dict(self.globals))
