"""Array-module primitives of the elementwise family (contract.Backend documents each). The
semantics are the CPU backend's (csrc/elementwise.c): integer division by zero is ERR_VALUE,
x / -1 wraps, shifts outside [0, bits) give 0 or the sign fill, a negative integer power is 0
except for bases 1 and -1, maximum/minimum propagate NaN, sign(NaN) is 0, rounding is half to
even."""

import math

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C

__all__ = ["ElementwiseMixin"]


def _maxp(xp, x, y):
    if x.dtype.kind == "f":
        return xp.where(xp.isnan(x) | (x > y), x, y)
    return xp.maximum(x, y)


def _minp(xp, x, y):
    if x.dtype.kind == "f":
        return xp.where(xp.isnan(x) | (x < y), x, y)
    return xp.minimum(x, y)


class ElementwiseMixin:
    # ---- helpers -----------------------------------------------------------------------------
    def _special_fn(self, name):
        """A special function of this array module (scipy.special / cupyx.scipy.special), or
        None where it has none."""
        mod = self._special_module()
        return getattr(mod, name, None) if mod is not None else None

    def _special_module(self):
        if not hasattr(self, "_sp"):
            try:
                if self.is_numpy:
                    import scipy.special as sp
                else:
                    import cupyx.scipy.special as sp
            except Exception:  # no SciPy: the few functions with a math fallback still work
                sp = None
            self._sp = sp
        return self._sp

    def _math1(self, name, x):
        """erf or erfc: the array module's (scipy.special / cupyx.scipy.special), else
        ``_erf_pair``'s."""
        fn = self._special_fn(name)
        if fn is not None:
            return fn(x)
        erf, erfc = self._erf_pair(x.astype(np.float64))
        return (erf if name == "erf" else erfc).astype(x.dtype)

    def _erf_pair(self, x):
        """(erf(x), erfc(x)) for float64 x in array arithmetic (no SciPy): below |x| = 0.75
        the Taylor series of erf (30 terms); above, erfc by Laplace's continued fraction
        erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + (2/2) / (a + ...))), 400 levels
        evaluated from the bottom (converged to double precision for a >= 0.75), with
        exp(-a^2) from an exactly split a^2. Within a few ulps of libm."""
        xp = self.xp
        a = xp.abs(x)
        small = a < 0.75
        s = xp.where(small, a, 0.0)
        s2 = s * s
        term, ser = s, s
        for n in range(1, 30):
            term = term * (-s2) / n
            ser = ser + term / (2 * n + 1)
        erf_s = ser * (2.0 / math.sqrt(math.pi))
        b = xp.where(small, 1.0, a)
        t = b
        for k in range(400, 0, -1):
            t = b + (0.5 * k) / t
        hi, lo = self._sp_sq(b)
        e = xp.where(xp.isfinite(hi), xp.exp(-hi) * (1.0 - lo), 0.0)
        erfc_b = e / (math.sqrt(math.pi) * t)
        pos_erf = xp.where(small, erf_s, 1.0 - erfc_b)
        pos_erfc = xp.where(small, 1.0 - erf_s, erfc_b)
        neg = xp.signbit(x)
        erf = xp.where(neg, -pos_erf, pos_erf)
        erfc = xp.where(neg, 2.0 - pos_erfc, pos_erfc)
        nan = x != x
        return xp.where(nan, x, erf), xp.where(nan, x, erfc)

    def _erfc(self, x):
        """erfc; float64 above 1 as erfcx(x) exp(-x^2) with x^2 split exactly (libm's accuracy
        in the tail, where the array module's erfc rounds x^2 first: ~x^2 ulps)."""
        xp = self.xp
        erfcx = self._special_fn("erfcx")
        if x.dtype != np.float64 or erfcx is None:
            return self._math1("erfc", x)
        big = x > 1.0
        xb = xp.where(big, x, 1.0)
        hi, lo = self._sp_sq(xb)
        tail = erfcx(xb) * (xp.exp(-hi) * (1.0 - lo))
        return xp.where(big, tail, self._math1("erfc", x))

    # ---- unary ------------------------------------------------------------------------------
    def unary(self, op, out, x, p0, p1, p2):
        xp = self.xp
        v = self.get(x)
        isf = v.dtype.kind == "f"
        kind = v.dtype.kind
        f = _UNARY_DIRECT.get(op)
        if f is not None and isf and out._dtype is x._dtype:
            o = self.direct(out)
            if o is not None and not self._overlaps(out, x):
                if op == C.UN_RELU:  # maximum passes NaN through, as the C's x < 0 test does
                    xp.maximum(v, v.dtype.type(0), out=o)
                else:
                    getattr(xp, f)(v, out=o)  # one kernel straight into the result
                return 0
        if op == C.UN_NEG:
            r = -v if kind != "b" else None
        elif op == C.UN_EXP:
            r = xp.exp(v)
        elif op == C.UN_RELU:
            r = xp.where(v < 0, v.dtype.type(0), v)
        elif op == C.UN_ABS:
            r = xp.abs(v)
        elif op == C.UN_SIGN:
            if kind == "b":
                r = v.copy()
            else:
                r = ((v > 0).astype(np.int8) - (v < 0).astype(np.int8)).astype(v.dtype)
        elif op in _UNARY_FUNCS:
            r = getattr(xp, _UNARY_FUNCS[op])(v)
        elif op == C.UN_RSQRT:
            r = v.dtype.type(1) / xp.sqrt(v)
        elif op == C.UN_SQUARE:
            r = v * v
        elif op == C.UN_RECIPROCAL:
            r = v.dtype.type(1) / v
        elif op == C.UN_SIGMOID:
            r = self._sigmoid(v)
        elif op == C.UN_ERF:
            r = self._math1("erf", v)
        elif op == C.UN_ERFC:
            r = self._erfc(v)
        elif op in (C.UN_FLOOR, C.UN_CEIL, C.UN_ROUND, C.UN_TRUNC):
            if not isf:
                r = v.copy()
            else:
                r = {C.UN_FLOOR: xp.floor, C.UN_CEIL: xp.ceil, C.UN_ROUND: xp.rint,
                     C.UN_TRUNC: xp.trunc}[op](v)
        elif op == C.UN_FRAC:
            r = v - xp.trunc(v)
        elif op == C.UN_ISNAN:
            r = xp.isnan(v) if isf else xp.zeros(v.shape, np.bool_)
        elif op == C.UN_ISINF:
            r = xp.isinf(v) if isf else xp.zeros(v.shape, np.bool_)
        elif op == C.UN_ISPOSINF:
            r = (v == np.inf) if isf else xp.zeros(v.shape, np.bool_)
        elif op == C.UN_ISNEGINF:
            r = (v == -np.inf) if isf else xp.zeros(v.shape, np.bool_)
        elif op == C.UN_ISFINITE:
            r = xp.isfinite(v) if isf else xp.ones(v.shape, np.bool_)
        elif op == C.UN_SIGNBIT:
            r = xp.signbit(v) if isf else (v < 0) if kind == "i" else xp.zeros(v.shape, np.bool_)
        elif op == C.UN_NAN_TO_NUM:
            t = v.dtype.type
            r = xp.where(xp.isnan(v), t(p0), xp.where(v == np.inf, t(p1),
                                                        xp.where(v == -np.inf, t(p2), v)))
        elif op == C.UN_LOGICAL_NOT:
            r = v == 0
        elif op == C.UN_BITWISE_NOT:
            r = ~v
        elif op == C.UN_ROUND_DECIMALS:
            t = v.dtype.type
            r = xp.rint(v / t(p0)) * t(p0) if p1 else xp.rint(v * t(p0)) / t(p0)
        elif op == C.UN_LOG_SIGMOID:
            r = xp.minimum(v, v.dtype.type(0)) - xp.log1p(xp.exp(-xp.abs(v)))
        else:
            return C.ERR_OP
        if r is None:
            return C.ERR_DTYPE
        self.put(out, r)
        return 0

    def _sigmoid(self, v):
        xp = self.xp
        e = xp.exp(-xp.abs(v))
        one = v.dtype.type(1)
        return xp.where(v >= 0, one / (one + e), e / (one + e))

    # ---- binary ------------------------------------------------------------------------------
    def _overlaps(self, out, *ins):
        """out shares memory with an input in another layout (then compute first, then put)."""
        st = out._storage
        for t in ins:
            if t is not None and t._storage is st and (t._ptr != out._ptr or
                                                       t._stride != out._stride):
                return True
        return False

    def _binop(self, op, a, b, dt, p0=0.0, p1=0.0, p2=0.0):
        """(status, result) of binary op on the compute-dtype arrays a, b (broadcast)."""
        xp = self.xp
        isf = dt._kind == 2
        isb = dt is D.bool
        if op == C.BIN_ADD:
            return 0, (a | b) if isb else a + b
        if op == C.BIN_SUB:
            return 0, a - b
        if op == C.BIN_MUL:
            return 0, (a & b) if isb else a * b
        if op == C.BIN_DIV:
            return 0, a / b
        if C.BIN_EQ <= op <= C.BIN_GE:
            return 0, _CMP[op](a, b)
        if op == C.BIN_MAXIMUM:
            return 0, _maxp(xp, a, b)
        if op == C.BIN_MINIMUM:
            return 0, _minp(xp, a, b)
        if op in (C.BIN_FLOORDIV, C.BIN_TRUNCDIV, C.BIN_REMAINDER, C.BIN_FMOD):
            return self._divmod(op, a, b, isf)
        if op == C.BIN_POW:
            if isf:
                return 0, xp.power(a, b)
            return 0, self._ipow(a, b)
        if op == C.BIN_ATAN2:
            return 0, xp.arctan2(a, b)
        if op == C.BIN_HYPOT:
            return 0, xp.hypot(a, b)
        if op == C.BIN_COPYSIGN:
            return 0, xp.copysign(a, b)
        if op in (C.BIN_FMAX, C.BIN_FMIN):
            f = xp.fmax if op == C.BIN_FMAX else xp.fmin
            return 0, f(a, b)
        if op == C.BIN_LOGICAL_AND:
            return 0, (a != 0) & (b != 0)
        if op == C.BIN_LOGICAL_OR:
            return 0, (a != 0) | (b != 0)
        if op == C.BIN_LOGICAL_XOR:
            return 0, (a != 0) ^ (b != 0)
        if op == C.BIN_BITAND:
            return 0, a & b
        if op == C.BIN_BITOR:
            return 0, a | b
        if op == C.BIN_BITXOR:
            return 0, a ^ b
        if op in (C.BIN_LSHIFT, C.BIN_RSHIFT):
            return 0, self._shift(op, a, b, dt)
        if op == C.BIN_ISCLOSE:
            if isf:
                d = xp.abs(a - b)
                r = (a == b) | ((d <= a.dtype.type(p1) + xp.abs(a.dtype.type(p0) * b)) &
                                (d < np.inf))
                if p2:
                    r = r | (xp.isnan(a) & xp.isnan(b))
                return 0, r
            af = a.astype(np.float64)
            bf = b.astype(np.float64)
            return 0, (a == b) | (xp.abs(af - bf) <= p1 + xp.abs(p0 * bf))
        if op == C.BIN_ADD_ALPHA:
            if isf:
                return 0, a + a.dtype.type(p0) * b
            return 0, a + b * a.dtype.type(int(p0))
        return C.ERR_OP, None

    def _divmod(self, op, a, b, isf):
        xp = self.xp
        if isf:
            if op == C.BIN_FLOORDIV:
                return 0, xp.floor_divide(a, b)
            if op == C.BIN_TRUNCDIV:
                return 0, xp.trunc(a / b)
            if op == C.BIN_REMAINDER:
                return 0, xp.remainder(a, b)
            return 0, xp.fmod(a, b)
        if bool((b == 0).any()):
            return C.ERR_VALUE, None
        a, b = xp.broadcast_arrays(a, b)
        neg1 = b == -1
        bs = xp.where(neg1, b.dtype.type(1), b)  # x / -1 wraps: computed as a negation below
        if op == C.BIN_FMOD:
            r = xp.fmod(a, bs)
            return 0, xp.where(neg1, a.dtype.type(0), r)
        if op == C.BIN_REMAINDER:
            r = xp.remainder(a, bs)
            return 0, xp.where(neg1, a.dtype.type(0), r)
        if op == C.BIN_FLOORDIV:
            q = xp.floor_divide(a, bs)
        else:  # truncating: floor, plus one where the signs differ and it is inexact
            q = xp.floor_divide(a, bs)
            q = q + (((a % bs) != 0) & ((a < 0) != (bs < 0))).astype(q.dtype)
        return 0, xp.where(neg1, (a.dtype.type(0) - a).astype(a.dtype), q)

    def _ipow(self, a, b):
        xp = self.xp
        a, b = xp.broadcast_arrays(a, b)
        t = a.dtype.type
        e = xp.where(b < 0, b.dtype.type(0), b).astype(np.int64)
        r = xp.ones(a.shape, a.dtype)
        base = a.copy()
        while bool((e > 0).any()):
            odd = (e & 1) == 1
            r = xp.where(odd, r * base, r)
            base = base * base
            e = e >> 1
        neg = b < 0
        if bool(neg.any()):
            odd_e = (b & 1) == 1
            minus1 = (a == t(-1)) if a.dtype.kind == "i" else xp.zeros(a.shape, np.bool_)
            special = xp.where(a == t(1), t(1), xp.where(minus1, xp.where(odd_e, a, t(1)), t(0)))
            r = xp.where(neg, special, r)
        return r

    def _shift(self, op, a, b, dt):
        xp = self.xp
        bits = dt.itemsize * 8
        signed = dt.is_signed
        a, b = xp.broadcast_arrays(a, b)
        bl = b.astype(np.int64)
        t = a.dtype.type
        if op == C.BIN_LSHIFT:
            bad = (bl < 0) | (bl >= bits)
            safe = xp.where(bad, 0, bl).astype(a.dtype)
            return xp.where(bad, t(0), xp.left_shift(a, safe))
        bad = (bl < 0) | (bl >= bits - (1 if signed else 0))
        safe = xp.where(bad, 0, bl).astype(a.dtype)
        fill = xp.where(a < 0, t(-1) if signed else t(0), t(0))
        return xp.where(bad, fill, xp.right_shift(a, safe))

    def binary(self, op, shape, out, a, sa, b, sb, params=None):
        xp = self.xp
        ta, tb = type(a), type(b)
        if ta is float or ta is int or tb is float or tb is int:  # a number operand
            t, sv = (b, a) if ta is float or ta is int else (a, b)
            av = self.get(t, shape, sb if t is b else sa)
            dt = t._dtype
            # a NumPy scalar of the array's dtype: CuPy passes it to the kernel by value (a
            # 0-d device array would cost a host-to-device copy per call)
            if dt is D.bool:
                s = np.bool_(bool(sv))
            elif dt._kind == 2:
                s = av.dtype.type(sv)
            else:
                s = av.dtype.type(self._scalar(dt, 0.0, sv, True))
            x, y = (s, av) if t is b else (av, s)
            ins = (t,)
        else:
            x, y = self.get(a, shape, sa), self.get(b, shape, sb)
            dt = a._dtype
            ins = (a, b)
        f = _UFUNCS.get(op)
        if params is None and f is not None and dt._kind == 2 and out._dtype is dt and \
                not self._overlaps(out, *ins):
            o = self.direct(out)
            if o is not None and o.shape == tuple(shape):
                getattr(xp, f)(x, y, out=o)  # one pass straight into the result
                return 0
        f = _CMP_UFUNCS.get(op)
        if params is None and f is not None and out._dtype is D.bool and \
                not self._overlaps(out, *ins):
            o = self.raw(out)
            if o.shape == tuple(shape):
                getattr(xp, f)(x, y, out=o)  # a comparison straight into the result
                return 0
        rc, r = self._binop(op, x, y, dt, *(params or ()))
        if rc:
            return rc
        self.put(out, r)  # (put's assignment broadcasts r)
        return 0

    # ---- ternary -----------------------------------------------------------------------------
    def ternary(self, op, dtype, shape, out, a, sa, b, sb, c, sc, bf, bi, cf, ci, p0):
        xp = self.xp
        cdt = self.cdt(dtype)
        av = self.get(a, shape, sa)

        by_value = op == C.TER_WHERE or op == C.TER_CLAMP

        def operand(t, s, f, i):
            if t is not None:
                return self.get(t, shape, s)
            if dtype is D.bool:
                v = np.bool_(bool(i) or bool(f))
            elif dtype._kind == 2:
                v = cdt.type(f)
            else:
                v = cdt.type(self._scalar(dtype, f, i, True))
            # where and clamp take a scalar by value (a 0-d array would be a copy to the device
            # per call on a GPU); the other formulas want arrays
            return v if by_value else xp.asarray(v)

        bv = operand(b, sb, bf, bi)
        cv = operand(c, sc, cf, ci)
        if op == C.TER_WHERE:
            if dtype.code == D.bfloat16.code and b is not None and c is not None:
                # where moves bits: bfloat16 NaN payloads stay as they are
                r = xp.where(av, self.raw(b, shape, sb), self.raw(c, shape, sc))
                self.raw(out)[...] = r
                return 0
            r = xp.where(av, bv, cv)
        elif op == C.TER_CLAMP:
            r = _minp(xp, _maxp(xp, av, bv), cv)
        elif op == C.TER_LERP:
            r = xp.where(xp.abs(cv) < 0.5, av + cv * (bv - av), bv - (bv - av) * (1 - cv))
        elif op == C.TER_ADDCMUL:
            w = av.dtype.type(p0 if dtype._kind == 2 else int(p0))
            r = av + w * bv * cv
        elif op == C.TER_ADDCDIV:
            r = av + av.dtype.type(p0) * bv / cv
        else:
            return C.ERR_OP
        self.put(out, r)  # (put's assignment broadcasts r)
        return 0


_UNARY_FUNCS = {
    C.UN_EXP2: "exp2", C.UN_EXPM1: "expm1", C.UN_LOG: "log", C.UN_LOG2: "log2",
    C.UN_LOG10: "log10", C.UN_LOG1P: "log1p", C.UN_SQRT: "sqrt", C.UN_SIN: "sin",
    C.UN_COS: "cos", C.UN_TAN: "tan", C.UN_ASIN: "arcsin", C.UN_ACOS: "arccos",
    C.UN_ATAN: "arctan", C.UN_SINH: "sinh", C.UN_COSH: "cosh", C.UN_TANH: "tanh",
    C.UN_ASINH: "arcsinh", C.UN_ACOSH: "arccosh", C.UN_ATANH: "arctanh",
}

# float ops written straight into a same-dtype output by the array module's ufunc
_UFUNCS = {C.BIN_ADD: "add", C.BIN_SUB: "subtract", C.BIN_MUL: "multiply", C.BIN_DIV: "divide"}

# float unary ops written straight into a same-dtype result by one ufunc call
_UNARY_DIRECT = dict(_UNARY_FUNCS)
_UNARY_DIRECT.update({C.UN_EXP: "exp", C.UN_NEG: "negative", C.UN_ABS: "absolute",
                      C.UN_RELU: "maximum", C.UN_SQUARE: "square",
                      C.UN_RECIPROCAL: "reciprocal"})

# comparisons written straight into a bool result by one ufunc call
_CMP_UFUNCS = {C.BIN_EQ: "equal", C.BIN_NE: "not_equal", C.BIN_LT: "less", C.BIN_LE: "less_equal",
               C.BIN_GT: "greater", C.BIN_GE: "greater_equal"}

_CMP = {
    C.BIN_EQ: lambda a, b: a == b, C.BIN_NE: lambda a, b: a != b,
    C.BIN_LT: lambda a, b: a < b, C.BIN_LE: lambda a, b: a <= b,
    C.BIN_GT: lambda a, b: a > b, C.BIN_GE: lambda a, b: a >= b,
}
