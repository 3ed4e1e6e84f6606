"""Operator schemas: PyTorch's schema syntax parsed, and schemas inferred from annotations.

``ns::name.overload(Tensor x, float alpha=1.0, *, int dim=0) -> Tensor`` has arguments (type,
name, default, keyword-only), alias annotations (``Tensor(a!)``: written in place) and returns.
"""

import inspect
import math
import re
import typing
from collections import abc

__all__ = ["Argument", "FunctionSchema", "parse_schema", "infer_schema"]

_NO_DEFAULT = inspect.Parameter.empty


class AliasInfo:
    """The ``(a!)`` of ``Tensor(a!)``: the alias set and whether the op writes to it."""

    def __init__(self, text):
        self.text = text
        self.is_write = text.endswith("!")
        self.before_set = {text.rstrip("!")}

    def __repr__(self):
        return f"AliasInfo({self.text!r})"


class Argument:
    """One argument or return of a schema: ``type`` as PyTorch prints it in schema strings
    (``Tensor``, ``Tensor?``, ``Tensor[]``, ``SymInt[]``, ``float``...)."""

    def __init__(self, name, type, default=_NO_DEFAULT, kwarg_only=False, alias_info=None,
                 fixed_size=None):
        self.name = name
        self.type = type
        self.default_value = None if default is _NO_DEFAULT else default
        self.has_default_value = default is not _NO_DEFAULT
        self.kwarg_only = kwarg_only
        self.alias_info = alias_info
        self.fixed_size = fixed_size

    @property
    def is_write(self):
        return self.alias_info is not None and self.alias_info.is_write

    @property
    def is_out(self):
        return self.kwarg_only and self.is_write

    @property
    def base(self):
        """The element type: ``Tensor`` for ``Tensor``, ``Tensor?``, ``Tensor[]``, ``Tensor?[]``."""
        return self.type.replace("?", "").replace("[]", "")

    @property
    def is_list(self):
        return self.type.rstrip("?").endswith("[]")

    @property
    def is_optional(self):
        return self.type.endswith("?")

    @property
    def is_tensor_like(self):
        return self.base == "Tensor"

    def _type_str(self):
        t = self.type
        if self.alias_info is None:
            return t
        a = f"({self.alias_info.text})"
        if t.startswith("Tensor?[]"):
            return "Tensor" + a + "?[]"
        if t.startswith("Tensor[]"):
            return "Tensor" + a + "[]" + t[len("Tensor[]"):]
        return "Tensor" + a + t[len("Tensor"):]

    def __str__(self):
        t = self._type_str()
        if self.fixed_size is not None:
            t = t.replace("[]", f"[{self.fixed_size}]", 1)
        s = f"{t} {self.name}" if self.name else t
        if self.has_default_value:
            s += "=" + _default_str(self.default_value, self)
        return s

    __repr__ = __str__


def _default_str(v, arg):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (list, tuple)):
        if arg.fixed_size is not None and len(set(v)) == 1 and len(v) == arg.fixed_size:
            return _default_str(v[0], arg)
        return "[" + ", ".join(_default_str(x, arg) for x in v) + "]"
    name = getattr(v, "_name", None) or str(v).rsplit(".", 1)[-1]
    return str(name)


class FunctionSchema:
    """A parsed schema: ``name`` (``ns::op``), ``overload_name``, ``arguments``, ``returns``."""

    def __init__(self, name, overload_name, arguments, returns):
        self.name = name
        self.overload_name = overload_name
        self.arguments = arguments
        self.returns = returns

    @property
    def is_mutable(self):
        return any(a.is_write for a in self.arguments)

    def _sig(self):
        parts, star = [], False
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        if len(self.returns) == 1 and not self.returns[0].name:
            rets = str(self.returns[0])
        else:
            rets = "(" + ", ".join(str(r) for r in self.returns) + ")"
        return "(" + ", ".join(parts) + ") -> " + rets

    def __str__(self):
        name = self.name + (f".{self.overload_name}" if self.overload_name else "")
        return name + self._sig()

    def __repr__(self):
        return str(self)


# ---- parsing ------------------------------------------------------------------------------

_BASE_TYPES = {"Tensor", "int", "SymInt", "float", "bool", "str", "Scalar", "ScalarType",
               "Device", "Layout", "MemoryFormat", "Generator", "Dimname", "Storage",
               "Stream", "Any", "complex", "SymFloat", "SymBool", "t"}


def _split_top(text, what):
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                raise RuntimeError(f"{what}: unbalanced brackets in {text!r}")
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise RuntimeError(f"{what}: unbalanced brackets in {text!r}")
    tail = "".join(cur).strip()
    if tail or out:
        out.append(tail)
    return out


_TYPE_RE = re.compile(r"^([A-Za-z_][A-Za-z_0-9]*)(\(([a-z0-9]+!?)\))?(\?)?(\[(\d*)\])?(\?)?$")


def _parse_type(text, what):
    m = _TYPE_RE.match(text)
    if m is None or m.group(1) not in _BASE_TYPES:
        raise RuntimeError(f"{what}: unknown type {text!r} (expected one of Tensor, int, SymInt, "
                           "float, bool, str, Scalar, ScalarType, Device, ... with ?, [] or "
                           "an alias annotation such as Tensor(a!))")
    base, _, alias, opt1, lst, size, opt2 = m.groups()
    t = base + ("?" if opt1 else "") + ("[]" if lst else "") + ("?" if opt2 else "")
    alias_info = AliasInfo(alias) if alias else None
    if alias_info is not None and base != "Tensor":
        raise RuntimeError(f"{what}: alias annotations are for Tensors, got {text!r}")
    return t, alias_info, (int(size) if size else None)


def _parse_default(text, type_, fixed, what):
    s = text.strip()
    if s == "None":
        return None
    if s in ("True", "False"):
        return s == "True"
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    if s.startswith("["):
        if not s.endswith("]"):
            raise RuntimeError(f"{what}: bad list default {text!r}")
        inner = s[1:-1].strip()
        return [_parse_default(x, type_.replace("[]", ""), None, what)
                for x in _split_top(inner, what)] if inner else []
    if s in ("inf", "-inf", "nan"):
        return float(s)
    try:
        v = int(s)
    except ValueError:
        try:
            v = float(s)
        except ValueError:
            if re.match(r"^[A-Za-z_][A-Za-z_0-9.]*$", s):
                return s  # an enum name (ScalarType long, contiguous_format, ...)
            raise RuntimeError(f"{what}: cannot parse the default value {text!r}") from None
    if "float" in type_ and isinstance(v, int):
        v = float(v)
    if "[]" in type_ and not isinstance(v, list):
        v = [v] * (fixed or 1)
    return v


def _parse_arg(text, kwarg_only, what, is_return=False):
    default = _NO_DEFAULT
    if "=" in text and not is_return:
        text, dtext = text.split("=", 1)
        text = text.strip()
    else:
        dtext = None
    parts = text.split()
    if is_return and len(parts) == 1:
        tname, name = parts[0], ""
    elif len(parts) == 2:
        tname, name = parts
    else:
        raise RuntimeError(f"{what}: expected 'Type name' for an argument, got {text!r}")
    t, alias, fixed = _parse_type(tname, what)
    if dtext is not None:
        default = _parse_default(dtext, t, fixed, what)
    return Argument(name, t, default, kwarg_only, alias, fixed)


_NAME_RE = re.compile(r"^(?:([A-Za-z_][A-Za-z_0-9]*)::)?([A-Za-z_][A-Za-z_0-9]*)"
                      r"(?:\.([A-Za-z_][A-Za-z_0-9]*))?$")


def parse_schema(text, *, require_name=True):
    """Parse ``[ns::]name[.overload](args) -> returns`` (``require_name=False``: the name
    may be left out, as in ``custom_op``'s ``schema=``)."""
    what = f"schema {text!r}"
    s = text.strip()
    i = s.find("(")
    if i < 0:
        raise RuntimeError(f"{what}: expected '(' after the operator name")
    head = s[:i].strip()
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                break
    else:
        raise RuntimeError(f"{what}: expected ) to close the argument list")
    args_text, rest = s[i + 1:j], s[j + 1:].strip()
    if not rest.startswith("->"):
        raise RuntimeError(f"{what}: expected '-> <returns>' after the arguments")
    ret_text = rest[2:].strip()
    ns = name = overload = ""
    if head:
        m = _NAME_RE.match(head)
        if m is None:
            raise RuntimeError(f"{what}: bad operator name {head!r}")
        ns, name, overload = m.group(1) or "", m.group(2), m.group(3) or ""
    elif require_name:
        raise RuntimeError(f"{what}: the operator name is missing")
    args, kw = [], False
    for a in _split_top(args_text, what):
        if a == "*":
            if kw:
                raise RuntimeError(f"{what}: '*' given twice")
            kw = True
            continue
        if not a:
            raise RuntimeError(f"{what}: empty argument")
        args.append(_parse_arg(a, kw, what))
    seen = set()
    for a in args:
        if a.name in seen:
            raise RuntimeError(f"{what}: argument {a.name!r} given twice")
        seen.add(a.name)
    if ret_text.startswith("("):
        if not ret_text.endswith(")"):
            raise RuntimeError(f"{what}: bad returns {ret_text!r}")
        rets = [_parse_arg(r, False, what, True) for r in _split_top(ret_text[1:-1], what)]
    else:
        rets = [_parse_arg(ret_text, False, what, True)]
    full = (ns + "::" + name) if ns else name
    return FunctionSchema(full, overload, args, rets)


# ---- inference from annotations -----------------------------------------------------------

def _annotation_table():
    import fiamma

    T, O, S = fiamma.Tensor, typing.Optional, typing.Sequence
    table = {}

    def add(py, name, lists=True, opt_lists=True):
        table[py] = name
        table[O[py]] = name + "?"
        if lists:
            for L in (S, typing.List, abc.Sequence, list):
                table[L[py]] = name + "[]"
                if opt_lists:
                    table[O[L[py]]] = name + "[]?"
    add(T, "Tensor", opt_lists=False)
    for L in (S, typing.List, abc.Sequence, list):
        table[L[O[T]]] = "Tensor?[]"
    add(int, "SymInt")
    add(float, "float")
    add(bool, "bool")
    add(str, "str", lists=False)
    scalar = typing.Union[int, float, bool]
    table[scalar] = "Scalar"
    table[O[scalar]] = "Scalar?"
    for L in (S, typing.List, abc.Sequence, list):
        table[L[scalar]] = "Scalar[]"
    add(fiamma.dtype, "ScalarType", lists=False)
    add(fiamma.device, "Device", lists=False)
    return table


def _return_table():
    import fiamma

    T = fiamma.Tensor
    t = {T: "Tensor", int: "SymInt", float: "float", bool: "bool"}
    for L in (typing.Sequence, typing.List, abc.Sequence, list):
        t[L[T]] = "Tensor[]"
    return t


def _hints(fn):
    try:
        return typing.get_type_hints(fn)
    except Exception:
        return dict(getattr(fn, "__annotations__", {}))


def infer_schema(prototype_function, /, *, mutates_args, op_name=None, tags=()):
    """The schema string of ``prototype_function`` from its type annotations (PyTorch's
    ``torch.library.infer_schema``): ``mutates_args`` names the Tensor arguments it writes
    (``"unknown"``: all of them); ``op_name`` prefixes the name.

    >>> import fiamma
    >>> def f(x: fiamma.Tensor, n: int, out: fiamma.Tensor, *, s: float = 1.0) -> None: ...
    >>> infer_schema(f, mutates_args={"out"})
    '(Tensor x, SymInt n, Tensor(a2!) out, *, float s=1.0) -> ()'
    """
    sig = inspect.signature(prototype_function)

    def error(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")

    table = _annotation_table()
    hints = _hints(prototype_function)
    if mutates_args != "unknown":
        if isinstance(mutates_args, str):
            error("mutates_args must be 'unknown' or an iterable of argument names, got the "
                  f"string {mutates_args!r}.")
        mutates = set(mutates_args)
    parts, star = [], False
    for idx, (name, p) in enumerate(sig.parameters.items()):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            error("We do not support positional-only args, varargs, or varkwargs.")
        if p.annotation is p.empty:
            error(f"Parameter {name} must have a type annotation.")
        ann = hints.get(name, p.annotation)
        if ann not in table:
            error(f"Parameter {name} has unsupported type {ann}. The valid types are: Tensor, "
                  "Optional[Tensor], Sequence[Tensor], Sequence[Optional[Tensor]], int, float, "
                  "bool, str, Union[int, float, bool] (Scalar), dtype, device, their Optional "
                  "forms and Sequences of int, float, bool.")
        t = table[ann]
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        writes = (mutates_args == "unknown" and t.startswith("Tensor")) or \
            (mutates_args != "unknown" and name in mutates)
        if writes and not t.startswith("Tensor"):
            error(f"Parameter {name} is in mutable_args but only Tensors or collections of "
                  "Tensors can be mutated")
        if writes:
            t = "Tensor" + f"(a{idx}!)" + t[len("Tensor"):]
        s = f"{t} {name}"
        if p.default is not p.empty:
            d = p.default
            if d is not None and not isinstance(d, (int, float, bool, str)) and \
                    type(d).__name__ not in ("dtype", "device"):
                error(f"Parameter {name} has an unsupported default value type {type(d)}. "
                      "Please file an issue on GitHub so we can prioritize this.")
            s += "=" + _default_str(d, Argument(name, t))
        parts.append(s)
    if mutates_args != "unknown":
        for name in mutates:
            if name not in sig.parameters:
                error(f"{name} in mutates_args is not in the function's arguments.")
    if sig.return_annotation is sig.empty:
        error("No return type annotation was provided. Please add one.")
    rets = _returns_str(hints.get("return", sig.return_annotation), error)
    schema = "(" + ", ".join(parts) + ") -> " + rets
    return (op_name + schema) if op_name else schema


def _returns_str(ann, error):
    if ann is None or ann is type(None):
        return "()"
    table = _return_table()
    origin = typing.get_origin(ann)
    if origin is tuple:
        elems = typing.get_args(ann)
        out = []
        for e in elems:
            if e not in table:
                error(f"Return has unsupported type {ann}. The valid types are: Tensor, "
                      "Sequence[Tensor], int, float, bool and tuples of them.")
            out.append(table[e])
        return "(" + ", ".join(out) + ")"
    if ann not in table:
        error(f"Return has unsupported type {ann}. The valid types are: Tensor, "
              "Sequence[Tensor], int, float, bool and tuples of them.")
    return table[ann]
