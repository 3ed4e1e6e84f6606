"""The CPU backend's fast paths: the one-pass ``cat`` of contiguous CPU tensors (``cat_simple``),
the one-call product of small CPU operands (``mm_simple``), and the binary-op driver's fast test
(``compile_binary``: ``x + y``, ``fiamma.mul(x, y)``, ``x += 1``, ``x.add_(y, alpha=2)``): one
Python frame and one C call when the operands are contiguous CPU tensors of one dtype and shape
(or a tensor and a Python number that needs no cast), and the general path (``fallback``,
which dispatches on the device) otherwise. The op layer (fiamma._ops.elementwise.binary_driver)
compiles its entries here: this is a CPU detail of the one binary-op driver, not a second op
layer (it decides nothing the general path does not)."""

import linecache

# D, G and CPU are used by the generated source
from fiamma import _dtype as D, _grad_hook as G, _storage as _S, _tensor_factory as TF  # noqa: F401,E501
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._lib import lib
from fiamma._storage import CPU  # noqa: F401

__all__ = ["compile_binary", "add_inplace", "deprecated_alpha", "cat_simple", "mm_simple"]

_I64 = 1 << 63

_ONE = (1,)


def _scalar_fast_ok(self, other, tp, truediv):
    """Whether ``self op other`` (other a Python int/float of type tp) runs in self's dtype
    without a cast: float tensors with any number, integer tensors with ints."""
    dt = self._dtype
    if dt._kind == 2:
        return True
    return tp is int and dt._kind == 1 and not truediv and -_I64 <= other < _I64


# what every operator method's hot path uses, as module globals: a closure's free variables
# are copied into the frame at every call (Python 3.11), globals are not
_SMALL, _FREE = _S._small, _S._free
_NEW = object.__new__
_STORAGE = _S.Storage
_binary_contig_small = lib.fm_binary_contig_small  # fm_binary_contig, keeping the GIL
_binary_contig_c = lib.fm_binary_contig
_binary_scalar_contig_c = lib.fm_binary_scalar_contig
_binary_c = lib.fm_binary


def _new_block(nb, name):
    """A block for an operator's result when the free list of its size is empty or missing."""
    ptr = _S.fresh_block(nb)
    if not ptr:
        raise MemoryError(f"{name}: cannot allocate {nb} bytes on the CPU")
    return ptr


# The binary-op driver's fast test and its one-call bodies, as source compiled once per op when
# the op layer loads (fiamma._ops.elementwise.binary_driver). The hot path (two same-dtype,
# same-shape, contiguous CPU tensors, or such a tensor and a Python number that needs no cast)
# builds the result inline (what new_empty does, without the calls): this is the whole cost of
# a small op, so the op's code, name and kind are constants written in instead of branched on
# at each call (measured: see docs/architecture.md, "One binary-op driver"), and what it calls
# are module globals (a closure's cells are copied into every frame in Python 3.11).
_TENSOR_TEST = """
        if ({self_ok}type(other) is Tensor and other._dtype is self._dtype and
                other._shape == self._shape and self._cpu_contig and other._cpu_contig{extra}):"""
_TENSOR_NEW = """
            dt = self._dtype{int_div}
            n = self._numel
            nb = n * {rdt}.itemsize
            pool = _SMALL.get(nb)  # only sizes up to _S.SMALL_BYTES have one
            if pool:  # a small block: a short call, made without releasing the GIL
                ptr = pool.pop()
                rc = _binary_contig_small({code}, dt.code, n, ptr, self._ptr, other._ptr)
            else:
                ptr = _new_block(nb, {name!r})
                rc = _binary_contig_c({code}, dt.code, n, ptr, self._ptr, other._ptr)
            if rc:
                _FREE(ptr, nb)
                if dt._kind == 3:  # complex: computed by the general path
                    return {miss_call}
                _raise(rc, {name!r}, dt)
            st = _NEW(_STORAGE)
            st.ptr = ptr
            st.nbytes = nb
            st.version = 0
            res = _NEW(Tensor)
            res._storage = st
            res._dtype = {rdt}
            shape = res._shape = self._shape
            try:
                res._stride = _STRIDES[shape]
            except KeyError:
                res._stride = _cached_strides(shape)
            res._offset = 0
            res._ptr = ptr
            res._numel = n
            res._contig = res._cpu_contig = True
            res.requires_grad = False
            res._grad = None
            res.grad_fn = None
            res._ag = None
            if self.requires_grad or other.requires_grad:
                G.record_new(_KEY, res, (self, other))
            return res"""
_TENSOR_INPLACE = """
            rc = _binary_contig_c({code}, self._dtype.code, self._numel, self._ptr, self._ptr,
                                  other._ptr)
            if rc:
                if self._dtype._kind == 3:  # complex: computed by the general path
                    return {miss_call}
                _raise(rc, {name!r}, self._dtype)
            if not self._quiet_version:
                self._storage.version += 1
            return self"""
_SCALAR_TEST = """
        tp = type(other)
        if ({self_ok}(tp is float or tp is int) and self._cpu_contig{extra} and
                _scalar_fast_ok(self, other, tp, {truediv})):"""
_SCALAR_NEW = """
            dt = self._dtype
            res = new_empty(self._shape, {rdt}, CPU)
            rc = _binary_scalar_contig_c({code}, dt.code, self._numel, res._ptr, {operands},
                                         other, other if dt._kind == 1 else 0)
            if rc:
                _raise(rc, {name!r}, dt)
            if self.requires_grad:
                G.record_new(_KEY, res, {inputs})
            return res"""
_SCALAR_INPLACE = """
            rc = _binary_scalar_contig_c({code}, self._dtype.code, self._numel, self._ptr,
                                         self._ptr, 0, other,
                                         other if self._dtype._kind == 1 else 0)
            if rc:
                _raise(rc, {name!r}, self._dtype)
            if not self._quiet_version:
                self._storage.version += 1
            return self"""
_GUARD = """
        if not (isinstance(other, Tensor) or is_scalar(other)):
            return NotImplemented"""
_DRIVER_SRC = """
def make(fallback):
    def {fn}(self, other):{body}
        return {miss_call}
    return {fn}
"""
# the entries compile_binary makes: (tensor-tensor case, number case, NotImplemented for other
# operand types, in place)
_VARIANTS = {
    "function": (True, True, False, False),    # fiamma.add(x, y) without out=: any operands
    "operator": (True, True, True, False),     # x + y
    "reflected": (False, True, True, False),   # 1 + x (__radd__): other is never a Tensor
    "inplace": (True, True, True, True),       # x += y
    "inplace_method": (True, True, False, True),  # x.mul_(y)
}


def compile_binary(code, name, kind, variant, fallback, raise_, is_number, *, predicate,
                   truediv, number_fast=True):
    """One entry of binary op ``code`` (``name``: its autograd and error name; ``kind``: the op
    layer's dtype rule) for ``variant`` (a key of _VARIANTS): the fast test and its one C call,
    and for everything else ``fallback(self, other)`` (``fallback(other, self)`` for
    "reflected"), or, when ``fallback`` is a tuple ``(general,)``, the general driver
    ``general(code, name, kind, self, other)`` called directly. ``predicate``: a bool result;
    ``truediv``: integer operands promote (left to the fallback); ``number_fast`` False: no
    number case (pow's number shortcuts live in pow()). ``raise_(rc, name, dtype)`` turns a C
    status into the op's error; ``is_number(x)``: whether x is a number operand (the operators
    return NotImplemented for anything else). The tensor class and its factories come from
    fiamma._tensor_factory (a backend does not import fiamma._tensor)."""
    tensor_case, number_case, guard, inplace = _VARIANTS[variant]
    key, name = name, str(name)  # the recorded op's key (fiamma.autograd_hook.ops), its name
    reflected = variant == "reflected"
    pair = "other, self" if reflected else "self, other"
    if isinstance(fallback, tuple):
        (general,), fallback = fallback, None
        miss_call = f"_general({int(code)}, _KEY, {int(kind)}, {pair})"
    else:
        general, miss_call = None, f"fallback({pair})"
    f = dict(code=int(code), name=name, truediv=bool(truediv), pred=bool(predicate),
             rdt="D.bool" if predicate else "dt", inputs=f"({pair})",
             operands="0, self._ptr" if reflected else "self._ptr, 0",
             self_ok="type(self) is Tensor and " if variant == "function" else "",
             miss_call=miss_call)
    body = ""
    if tensor_case:
        if inplace:
            # no gradient to record, no partial overlap of self and other, and integer true
            # division (a float result) is not in place
            extra = ("and not (self.requires_grad or other.requires_grad) and\n"
                     "                (other._storage is not self._storage or "
                     "other._ptr == self._ptr)")
            if truediv:
                extra += " and self._dtype._kind == 2"
            body += _TENSOR_TEST.format(extra=" " + extra, **f)
            body += _TENSOR_INPLACE.format(**f)
        else:
            # integer true division promotes to float: the general path does that
            int_div = (f"\n            if dt._kind != 2:\n                return {miss_call}"
                       if truediv else "")
            body += _TENSOR_TEST.format(extra="", **f)
            body += _TENSOR_NEW.format(int_div=int_div, **f)
    if number_case and number_fast:
        body += _SCALAR_TEST.format(extra=" and not self.requires_grad" if inplace else "", **f)
        body += (_SCALAR_INPLACE if inplace else _SCALAR_NEW).format(**f)
    if guard:
        body += _GUARD
    fn = {"operator": f"__{name}__", "reflected": f"__r{name}__",
          "inplace": f"__i{name}__", "inplace_method": f"{name}_"}.get(variant, name)
    src = _DRIVER_SRC.format(fn=fn, body=body, miss_call=f["miss_call"])
    filename = f"<fiamma binary driver {name} {variant}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)  # tracebacks
    scope = {}
    scope_globals = dict(globals(), _raise=raise_, _general=general, is_scalar=is_number,
                         _KEY=key, Tensor=TF.Tensor, new_empty=TF.new_empty, _STRIDES=TF.STRIDES,
                         _cached_strides=TF.cached_strides)
    exec(compile(src, filename, "exec"), scope_globals, scope)
    entry = scope["make"](fallback)
    entry.__qualname__ = fn if variant == "function" else f"Tensor.{fn}"
    return entry


_DEPRECATED = {
    "add": ("add(Tensor input, Number alpha, Tensor other, *, Tensor out = None)",
            "add(Tensor input, Tensor other, *, Number alpha = 1, Tensor out = None)"),
    "sub": ("sub(Tensor input, Number alpha, Tensor other, *, Tensor out = None)",
            "sub(Tensor input, Tensor other, *, Number alpha = 1, Tensor out = None)"),
    "add_": ("add_(Number alpha, Tensor other)", "add_(Tensor other, *, Number alpha = 1)"),
    "sub_": ("sub_(Number alpha, Tensor other)", "sub_(Tensor other, *, Number alpha = 1)"),
}


def deprecated_alpha(name, alpha, args, keyword_alpha):
    """PyTorch's deprecated overload ``x.add_(alpha, other)`` (also ``add``/``sub``/``sub_``,
    as old tutorials write ``p.data.add_(-lr, p.grad.data)``): the number first, then the
    tensor (or two numbers: ``x.add(2, 3)`` is ``x + 6`` either way). Returns ``(other,
    alpha)`` and warns as PyTorch does; anything else raises."""
    import warnings

    num = (int, float, complex)
    if (len(args) != 1 or keyword_alpha != 1 or
            not (isinstance(args[0], TF.Tensor) or isinstance(args[0], num)) or
            not isinstance(alpha, num) or isinstance(alpha, bool)):
        given = ", ".join(type(a).__name__ for a in (alpha, *args))
        raise TypeError(f"{name}(): expected (Tensor other, *, Number alpha=1) or the "
                        f"deprecated (Number alpha, Tensor other), got ({given}"
                        f"{', alpha=...' if keyword_alpha != 1 else ''})")
    old, new = _DEPRECATED[name]
    warnings.warn(f"This overload of {name} is deprecated:\n\t{old}\nConsider using one of the "
                  f"following signatures instead:\n\t{new}", UserWarning, stacklevel=3)
    return args[0], alpha


def add_inplace(key, sign, generic, raise_, is_number):
    """``add_`` / ``sub_`` (``key``: ops.add or ops.sub, ``sign`` 1 or -1) with alpha: the
    in-place driver when alpha is 1, and a fused ``self + alpha * other`` for a tensor other."""
    name = str(key)
    fast = compile_binary(K.BIN_ADD if sign > 0 else K.BIN_SUB, key, 0, "inplace_method",
                          generic, raise_, is_number, predicate=False, truediv=False)
    Tensor = TF.Tensor

    def method(self, other, *args, alpha=1):
        if args:  # the deprecated add_(alpha, other)
            other, alpha = deprecated_alpha(name + "_", other, args, alpha)
        if type(alpha) is int and alpha == 1:
            return fast(self, other)
        ta = type(alpha)
        if (type(other) is Tensor and other._dtype is self._dtype and other._shape ==
                self._shape and self._cpu_contig and other._cpu_contig and not
                (self.requires_grad or other.requires_grad) and
                (other._storage is not self._storage or other._ptr == self._ptr) and
                ((self._dtype._kind == 2 and (ta is int or ta is float)) or
                 (self._dtype._kind == 1 and ta is int))):
            if self._numel:
                rc = _binary_c(K.BIN_ADD_ALPHA, self._dtype.code, 1, (self._numel,),
                               self._ptr, _ONE, self._ptr, _ONE, other._ptr, _ONE, 0.0, 0,
                               float(sign * alpha), 0.0, 0.0)
                if rc:
                    raise_(rc, name + "_", self._dtype)
            if not self._quiet_version:
                self._storage.version += 1
            return self
        return generic(self, other, alpha=alpha)

    method.__name__ = name + "_"
    method.__doc__ = f"In-place version of :func:`{name}`."
    return method


_cat_bytes = lib.fm_cat_bytes


def cat_simple(ts, dim):
    """cat of same-dtype, contiguous CPU tensors of one rank that fit together, in one pass (a
    cat in a loop); None for anything else, which _cat then handles (with its errors)."""
    if not ts:
        return None
    t0 = ts[0]
    Tensor = TF.Tensor
    if type(t0) is not Tensor or type(dim) is not int:
        return None
    s0 = t0._shape
    nd = len(s0)
    if not -nd <= dim < nd:
        return None
    d = dim + nd if dim < 0 else dim
    dt = t0._dtype
    head, tail = s0[:d], s0[d + 1:]
    inner = dt.itemsize
    for n in tail:
        inner *= n
    total = 0
    grad = False
    ptrs = []
    sizes = []
    for t in ts:
        if type(t) is not Tensor or t._dtype is not dt or not t._cpu_contig:
            return None
        s = t._shape
        if len(s) != nd or s[:d] != head or s[d + 1:] != tail:
            return None
        n = s[d]
        total += n
        grad = grad or t.requires_grad
        ptrs.append(t._ptr)
        sizes.append(n * inner)
    res = TF.new_empty(head + (total,) + tail, dt, CPU)
    if res._numel:
        rows = 1
        for n in head:
            rows *= n
        rc = _cat_bytes(len(ts), rows, res._ptr, total * inner, ptrs, sizes)
        if rc:
            check(rc, "cat")
    if grad:
        G.record(ops.cat, res, tuple(ts), {"dim": d})
    return res


_mm = lib.fm_mm
_mm_bias = lib.fm_mm_bias_f32
_ADDMM_KW = {"beta": 1, "alpha": 1}


def addmm_simple(c, a, b):
    """``c + a @ b`` for a linear layer's operands in few steps: float32 CPU tensors, ``a`` and
    ``b`` matrices, ``c`` a contiguous (n,) bias, beta = alpha = 1 (the caller checks those and
    ``out``). One C call adds the bias as it stores the product. Returns None when it does not
    apply (the general path then handles it, errors included)."""
    sa, sb = a._shape, b._shape
    f32 = D.float32
    if (len(sa) != 2 or len(sb) != 2 or a._dtype is not f32 or b._dtype is not f32 or
            c._dtype is not f32 or c._stride != (1,) or a._layout_alt or b._layout_alt or
            c._layout_alt or a._storage.device is not CPU or b._storage.device is not CPU or
            c._storage.device is not CPU):
        return None
    m, k = sa
    n = sb[1]
    if sb[0] != k or c._shape != (n,) or not (m and n and k):
        return None
    res = TF.new_empty((m, n), f32, CPU)
    sam, sak = a._stride
    sbk, sbn = b._stride
    rc = _mm_bias(m, n, k, res._ptr, n, a._ptr, sam, sak, b._ptr, sbk, sbn, c._ptr)
    if rc:
        check(rc, "addmm", "dtype float32")
    if c.requires_grad or a.requires_grad or b.requires_grad:
        G.record(ops.addmm, res, (c, a, b), _ADDMM_KW)
    return res


def mm_simple(a, b, op):
    """The common case in few steps: CPU tensors of one dtype with at most 2 dims each, no
    gradient wanted. Returns None when it does not apply (or the shapes do not match: the
    general path then raises the error)."""
    sa, sb = a._shape, b._shape
    da, db = len(sa), len(sb)
    if not (0 < da <= 2 and 0 < db <= 2) or a._dtype is not b._dtype or a.requires_grad or \
            b.requires_grad or a._storage.device is not CPU or b._storage.device is not CPU:
        return None
    k = sa[-1]
    if db == 2:
        if sb[0] != k:
            return None
        n = sb[1]
        sbk, sbn = b._stride
    else:
        if sb[0] != k:
            return None
        n = 1
        sbk, sbn = b._stride[0], 0
    if da == 2:
        m = sa[0]
        sam, sak = a._stride
        shape = (m, n) if db == 2 else (m,)
    else:
        m = 1
        sam, sak = 0, a._stride[0]
        shape = (n,) if db == 2 else ()
    dt = a._dtype
    res = TF.new_empty(shape, dt, CPU)
    if dt._kind == 2:
        rc = _mm(dt.code, m, n, k, res._ptr, n, 1, a._ptr, sam, sak, b._ptr, sbk, sbn, 1.0, 0.0,
                 0, 0)
    else:
        rc = _mm(dt.code, m, n, k, res._ptr, n, 1, a._ptr, sam, sak, b._ptr, sbk, sbn, 0.0, 0.0,
                 1, 0)
    if rc:
        if dt._kind == 3:  # complex: the general path's complex GEMM
            return None
        check(rc, op, f"dtype {dt}")
    return res
