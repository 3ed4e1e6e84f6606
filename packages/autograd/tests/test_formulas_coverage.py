"""Ops are linked to derivatives by core's declared op keys (fiamma.autograd_hook.ops).

Every op name core records is declared in that table (the names are found in core's source, not
listed by hand), every differentiable declared op has a formula (checked when fiamma.autograd is
imported), and a misspelled or missing derivative fails at import. The names core records are
found thus: every ``G.record``/``G.record_inplace`` call site is followed back through the
functions that pass the op along (``binary(code, name, ...)``, ``_view(..., op=ops.transpose)``,
``_sum_like(code, ops.sum, ...)``, local ``op = ops.uniform_``...) to the keys (``ops.<name>``)
that reach it; a plain string reaching the recorder fails the test (core passes keys, so a
misspelled op is an AttributeError when its module is imported). A new recording op that is not
declared (or a new way of passing ops that this scan cannot follow) fails here; the engine also
refuses an undeclared name when it first records it.
"""

import ast
import importlib
import pathlib
import subprocess
import sys
import textwrap

import pytest

import fiamma
from fiamma.autograd import _formulas as F
from fiamma.autograd_hook import OpTable, ops

CORE = pathlib.Path(fiamma.__file__).parent

# ops whose results are never floating point (the engine does not record them)
NON_DIFFERENTIABLE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "bitwise_left_shift", "bitwise_right_shift", "isnan", "isinf", "isposinf", "isneginf",
    "isfinite", "signbit", "isclose", "equal", "all", "any", "count_nonzero", "argmax",
    "argmin",
    "histc",  # float counts, but not differentiable (PyTorch has no derivative either)
})


def _func_params(fn):
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


class _Scan(ast.NodeVisitor):
    """One module's calls (callee name, owner, node, enclosing functions), its string
    assignments per function and the names of the functions it defines."""

    def __init__(self, module):
        self.module = module
        self.stack = []
        self.calls = []
        self.defined = set()
        self.imported = {}  # name -> the module file it is imported from
        self.assigns = {}   # (module, function name, var) -> {literals}

    def visit_ImportFrom(self, node):
        if node.module and node.module.startswith("fiamma"):
            parts = node.module.split(".")[1:]
            src = "/".join(parts) + ".py" if parts else "__init__.py"
            for a in node.names:
                self.imported[a.asname or a.name] = src
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        self.defined.add(node.name)
        self.stack.append(node)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node):
        v = node.value
        if self.stack and isinstance(v, ast.Constant) and isinstance(v.value, str):
            name = v.value
            ASSIGNED_STRINGS.add((self.module, self.stack[-1].name, v.lineno, name))
        elif self.stack and isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and \
                v.value.id == "ops":
            name = v.attr
        else:
            name = None
        if name is not None:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    key = (self.module, self.stack[-1].name, t.id)
                    self.assigns.setdefault(key, set()).add(name)
        self.generic_visit(node)

    def visit_Call(self, node):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        owner = f.value.id if isinstance(f, ast.Attribute) and \
            isinstance(f.value, ast.Name) else None
        if name:
            self.calls.append((self.module, name, owner, node, list(self.stack)))
        self.generic_visit(node)


def _scan_core():
    scans = []
    for path in sorted(CORE.rglob("*.py")):
        s = _Scan(str(path.relative_to(CORE)))
        s.visit(ast.parse(path.read_text(), str(path)))
        scans.append(s)
    return scans


_STRINGS = set()  # (module, line, name): a plain string reaching the recorder
ASSIGNED_STRINGS = set()  # (module, function, line, name): ``op = "name"`` in a function


def _values(expr, module, stack, assigns):
    """(literals, parameter references) an expression can carry as an op name. A reference is
    (module, function, param index, param name, prefix) of an enclosing function's parameter
    (``"fft_" + op`` gives prefix "fft_")."""
    lits, refs = set(), set()
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and \
            expr.value.id == "ops":  # a key of fiamma.autograd_hook.ops
        lits.add(expr.attr)
    elif isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        lits.add(expr.value)
        _STRINGS.add((module, expr.lineno, expr.value))
    elif isinstance(expr, (ast.BoolOp, ast.IfExp)):
        for v in (expr.values if isinstance(expr, ast.BoolOp) else (expr.body, expr.orelse)):
            a, b = _values(v, module, stack, assigns)
            lits |= a
            refs |= b
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add) and \
            isinstance(expr.left, ast.Constant) and isinstance(expr.left.value, str):
        pre = expr.left.value
        a, b = _values(expr.right, module, stack, assigns)
        lits |= {pre + x for x in a}
        refs |= {r[:4] + (pre + r[4],) for r in b}
    elif isinstance(expr, ast.Name):
        for fn in reversed(stack):
            if (module, fn.name, expr.id) in assigns:
                lits |= assigns[(module, fn.name, expr.id)]
                _STRINGS.update((m, line, v) for m, f, line, v in ASSIGNED_STRINGS
                                if m == module and f == fn.name and v in lits)
                break
            plist = _func_params(fn)
            if expr.id in plist:
                refs.add((module, fn.name, plist.index(expr.id), expr.id, ""))
                break
    return lits, refs


def recorded_op_names():
    """The op names core's source passes to the autograd recorder, and the sinks that could
    not be resolved to literals."""
    scans = _scan_core()
    assigns, calls, defined, imported = {}, [], {}, {}
    for s in scans:
        assigns.update(s.assigns)
        calls.extend(s.calls)
        defined[s.module] = s.defined
        imported[s.module] = s.imported
    # sinks: (module or None, callee, positional index, keyword, prefix): the argument there
    # is an op name (after the prefix)
    sinks = {(None, "record", 0, "op", ""), (None, "record_inplace", 0, "op", ""),
             (None, "_view", 3, "op", ""),
             # the binary-op driver's entries record from generated source
             (None, "compile_binary", 1, "name", ""), (None, "add_inplace", 0, "key", "")}
    names, unresolved = set(), set()
    done = set()
    while True:
        new = set()
        for module, callee, owner, node, stack in calls:
            for smod, sname, idx, kw, pre in sinks:
                if callee != sname:
                    continue
                if sname.startswith("record") and owner not in ("G", "_grad_hook"):
                    continue
                # the callee is the calling module's own function or the one it imports, not a
                # namesake elsewhere
                if smod is not None:
                    # a backend primitive of the same name (``be.binary(...)`` on a local
                    # backend, ``_cpu.binary(...)``) takes no op name: only the op layer's do
                    if isinstance(node.func, ast.Attribute) and (
                            owner not in imported[module] or
                            imported[module][owner].startswith("_backend")):
                        continue
                    src = module if callee in defined[module] else \
                        imported[module].get(callee)
                    if src is not None and src != smod:
                        continue
                exprs = [k.value for k in node.keywords if k.arg == kw]
                if len(node.args) > idx:
                    exprs.append(node.args[idx])
                for e in exprs:
                    lits, refs = _values(e, module, stack, assigns)
                    names |= {pre + x for x in lits}
                    for r in refs:
                        sink = r[:4] + (pre + r[4],)
                        if sink not in sinks:
                            new.add(sink)
                    if not lits and not refs:
                        unresolved.add((sname, ast.unparse(e), type(e).__name__))
        if not new - done:
            break
        done |= new
        sinks |= new
    return names, unresolved


def test_every_recorded_op_is_declared_in_cores_table():
    names, unresolved = recorded_op_names()
    # the scan must find the known recording paths (sanity: it can fail)
    for known in ("add", "mul", "exp", "sum", "amax", "max", "cumprod", "softmax", "matmul",
                  "addmm", "view", "transpose", "getitem", "index", "index_put", "setitem",
                  "cat", "clone", "to", "clamp", "where", "lerp", "uniform_", "addmm_",
                  "as_strided", "copy_"):
        assert known in names, known
    strings = sorted(_STRINGS)
    assert not strings, f"core passes op names, not keys of autograd_hook.ops: {strings}"
    undeclared = sorted(n for n in names if n not in ops)
    assert not undeclared, f"ops recorded by core but not declared in autograd_hook.ops: " \
        f"{undeclared}"
    wrong = sorted(n for n in names if ops[n].differentiable == (n in NON_DIFFERENTIABLE))
    assert not wrong, f"declared with the wrong differentiable flag: {wrong}"
    # names the scan could not follow: only the recorder plumbing itself (``key``: the
    # __torch_dispatch__ layer replays records it captured, keys core already recorded), or a
    # slice of a name (``op[:-1]``: "tril_" -> "tril", whose literal is found elsewhere)
    assert all(expr in ("op", "name", "self._op", "key") or kind == "Subscript"
               for _, expr, kind in unresolved), unresolved


def test_every_differentiable_declared_op_has_a_formula():
    F.load_all()
    F.check_complete()  # what importing fiamma.autograd runs
    assert all(F.lookup(k) is not None or F.lookup_complex(k) is not None
               for k in ops if k.differentiable)


def test_a_missing_derivative_is_an_import_time_error():
    table = OpTable()
    table.declare("mul")
    table.declare("brand_new_op")
    table.declare("never_differentiated", differentiable=False)
    with pytest.raises(LookupError, match=r"\['brand_new_op'\]"):
        F.check_complete(table)
    # the real import: an op core declares without a formula makes fiamma.autograd fail
    code = textwrap.dedent("""
        import fiamma
        from fiamma.autograd_hook import declare_op
        declare_op("brand_new_op")
        try:
            import fiamma.autograd
        except LookupError as e:
            assert "brand_new_op" in str(e), e
            print("raised")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "raised", res.stderr


def test_a_misspelled_derivative_is_an_error_when_its_module_is_imported(tmp_path):
    (tmp_path / "my_formulas.py").write_text(textwrap.dedent("""
        from fiamma.autograd._formulas import derivative
        from fiamma.autograd_hook import ops

        @derivative(ops.mull, save="inputs")
        def _mul(ctx, grad):
            a, b = ctx.inputs
            return grad * b, grad * a
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(AttributeError, match="no attribute 'mull'"):
            importlib.import_module("my_formulas")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_formulas", None)


def test_derivative_takes_only_keys_of_cores_table():
    with pytest.raises(TypeError, match="op names are not accepted"):
        F.derivative("mul")
    other = OpTable().declare("mul")   # equal to ops.mul, but not core's key
    assert other == ops.mul and other is not ops.mul
    with pytest.raises(TypeError, match="expected op keys"):
        F.derivative(other)
    assert F.lookup(ops.mul) is F.lookup("mul") is not None


def test_non_differentiable_ops_are_not_recorded():
    x = fiamma.tensor([1.0, -2.0], dtype=fiamma.float64, requires_grad=True)
    for out in (x > 0, x == x, fiamma.isnan(x), x.signbit(), x.argmax(), x.all(),
                fiamma.logical_not(x)):
        assert not out.requires_grad and out.grad_fn is None
