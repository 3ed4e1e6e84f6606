"""Quasi-random (low-discrepancy) sequences: ``fiamma.quasirandom.SobolEngine``
(``torch.quasirandom.SobolEngine``).

The direction numbers are Joe & Kuo's published table new-joe-kuo-6.21201 (search criterion
D(6), dimensions up to 21201), the same table PyTorch uses, shipped bit-packed in
``fiamma/_sobol_directions.npz`` (about 390 KB; ``tools/make_sobol_directions.py`` writes it
from the copy SciPy distributes). Points are generated in Gray-code order with 30-bit
direction numbers, as PyTorch's engine, so an unscrambled engine gives PyTorch's points bit
for bit. Scrambling (Owen's linear matrix scrambling plus a random digital shift) draws its
random bits the way PyTorch's CPU generator does for ``torch.randint(2, ...)`` (MT19937
seeded with the low 32 bits of ``seed``), so ``SobolEngine(d, scramble=True, seed=s)`` gives
PyTorch's points for the same ``seed`` too; with ``seed=None`` the bits come from fiamma's
default generator (reproducible under ``fiamma.manual_seed``, not equal to PyTorch's).

>>> import fiamma
>>> eng = fiamma.quasirandom.SobolEngine(dimension=3)
>>> eng.draw(4).tolist()
[[0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.75, 0.25, 0.25], [0.25, 0.75, 0.75]]
>>> eng.num_generated
4
"""

import os

import numpy as np

__all__ = ["SobolEngine"]

_MAXBIT = 30
_MAXDIM = 21201
_DIRECTIONS = None  # (degree, interior coefficients, initial m values per dimension), loaded once


def _load_directions():
    global _DIRECTIONS
    if _DIRECTIONS is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sobol_directions.npz")
        with np.load(path) as z:
            degree = z["degree"].astype(np.int64)
            a = np.concatenate([[0], z["a"].astype(np.int64)])
            bits = np.unpackbits(z["m"])
        # unpack m_1..m_s of dimensions 1...: m_k is 1 + 2 * (its k - 1 stored bits)
        width = np.concatenate([np.arange(s) for s in degree[1:]])
        start = np.concatenate([[0], np.cumsum(width)[:-1]])
        vals = np.zeros(width.shape, np.int64)
        for b in range(int(width.max())):
            sel = width > b
            vals[sel] = (vals[sel] << 1) | bits[start[sel] + b]
        m = np.zeros((_MAXDIM, int(degree.max())), np.int64)
        rows = np.repeat(np.arange(1, _MAXDIM), degree[1:])
        m[rows, width] = (vals << 1) | 1
        _DIRECTIONS = degree, a, m
    return _DIRECTIONS


def _direction_numbers(dimension):
    """(dimension, 30) int64: the scaled direction numbers v_j = m_j * 2**(30 - j), j = 1..30,
    from the primitive polynomials' recurrence
    m_j = 2 a_1 m_{j-1} ^ 4 a_2 m_{j-2} ^ ... ^ 2**s m_{j-s} ^ m_{j-s}."""
    degree, a, m0 = _load_directions()
    s = degree[:dimension]
    a = a[:dimension]
    m = np.zeros((dimension, _MAXBIT), np.int64)
    m[0, :] = 1  # the first dimension: the van der Corput sequence
    d = np.arange(1, dimension)
    smax = int(s.max()) if dimension > 1 else 0
    m[1:, :min(smax, _MAXBIT)] = m0[1:dimension, :min(smax, _MAXBIT)]
    for j in range(1, _MAXBIT):  # 0-based column j holds m_{j+1}
        sel = d[s[d] <= j]
        if sel.size == 0:
            continue
        sd = s[sel]
        prev = m[sel, j - sd]
        val = prev ^ (prev << sd)
        for k in range(1, smax):
            use = k < sd
            coef = (a[sel] >> np.maximum(sd - 1 - k, 0)) & 1
            term = m[sel, j - k] << k
            val = np.where(use & (coef == 1), val ^ term, val)
        m[sel, j] = val
    return m << (_MAXBIT - 1 - np.arange(_MAXBIT))


class _MT19937Bits:
    """Random bits as PyTorch's CPU generator gives them to ``torch.randint(2, ...)``: the
    low bit of each 32-bit MT19937 output, the generator seeded like ``manual_seed(seed)``."""

    def __init__(self, seed):
        self._bg = np.random.MT19937()
        self._bg._legacy_seeding(int(seed) % (1 << 64) & 0xFFFFFFFF)

    def bits(self, shape):
        n = int(np.prod(shape))
        return (self._bg.random_raw(n) & 1).astype(np.int64).reshape(shape)


class _FiammaBits:
    """Random bits from fiamma's default generator (``seed=None``)."""

    def bits(self, shape):
        import fiamma

        return fiamma.randint(0, 2, tuple(shape), dtype=fiamma.int64).numpy()


def _scramble(v, ltm):
    """Owen's linear matrix scrambling: each direction number, as a column of its 30 bits
    (most significant first), multiplied over GF(2) by the dimension's lower-triangular
    matrix with a unit diagonal."""
    ltm = ltm.copy()
    idx = np.arange(_MAXBIT)
    ltm[:, idx, idx] = 1
    shifts = _MAXBIT - 1 - idx
    vbits = ((v[:, :, None] >> shifts) & 1).astype(np.float32)  # (dim, j, q)
    # (dim, j, p) = sum_q vbits[d, j, q] * ltm[d, p, q], exact in float32 (at most 30)
    prod = np.matmul(vbits, np.swapaxes(ltm, 1, 2).astype(np.float32))
    newbits = prod.astype(np.int64) & 1
    return (newbits << shifts).sum(axis=2)


def _rightmost_zero(n):
    """Position of the lowest zero bit of each n (the Gray-code flip index)."""
    n = np.asarray(n, np.int64)
    return np.log2((~n) & (n + 1)).astype(np.int64)


class SobolEngine:
    """An engine for (scrambled) Sobol sequences in ``[0, 1)^dimension``, dimension 1 to 21201
    (``torch.quasirandom.SobolEngine``).

    ``draw(n)`` returns the next ``n`` points as an ``(n, dimension)`` tensor (the default
    dtype, or ``dtype=``; ``out=`` is resized and filled); ``draw_base2(m)`` draws ``2**m``
    points, refusing a count that breaks the balance of a power-of-2 total;
    ``fast_forward(n)`` skips ``n`` points; ``reset()`` starts over. ``scramble=True``
    randomises the sequence (Owen's linear matrix scrambling and a digital shift) with
    PyTorch's random bits for the same ``seed``.

    >>> import fiamma
    >>> eng = fiamma.quasirandom.SobolEngine(2, scramble=True, seed=0)
    >>> pts = eng.draw_base2(3)
    >>> tuple(pts.shape), bool(((pts >= 0) & (pts < 1)).all())
    ((8, 2), True)
    >>> # each dimension puts exactly one of the 8 points in each eighth of [0, 1)
    >>> sorted((pts[:, 0] * 8).long().tolist())
    [0, 1, 2, 3, 4, 5, 6, 7]
    """

    MAXBIT = _MAXBIT
    MAXDIM = _MAXDIM

    def __init__(self, dimension, scramble=False, seed=None):
        import fiamma

        if isinstance(dimension, bool) or not isinstance(dimension, (int, np.integer)):
            raise TypeError(f"SobolEngine: dimension must be an int, got "
                            f"{type(dimension).__name__}")
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError("Supported range of dimensionality for SobolEngine is "
                             f"[1, {self.MAXDIM}] (got {dimension})")
        self.seed = seed
        self.scramble = scramble
        self.dimension = int(dimension)
        v = _direction_numbers(self.dimension)
        if scramble:
            rng = _FiammaBits() if seed is None else _MT19937Bits(seed)
            shift_bits = rng.bits((self.dimension, self.MAXBIT))
            shift = (shift_bits << np.arange(self.MAXBIT)).sum(axis=1)
            ltm = np.tril(rng.bits((self.dimension, self.MAXBIT, self.MAXBIT)))
            v = _scramble(v, ltm)
        else:
            shift = np.zeros(self.dimension, np.int64)
        self.sobolstate = fiamma.from_numpy(np.ascontiguousarray(v, np.int64))
        self.shift = fiamma.from_numpy(np.ascontiguousarray(shift, np.int64))
        self.quasi = self.shift.clone()
        # PyTorch divides the integer first point in the default dtype, then converts
        self._first_point = (self.quasi / 2 ** self.MAXBIT).reshape(1, -1)
        self.num_generated = 0

    def _advance(self, n, index):
        """The next ``n`` states from ``self.quasi``, whose Gray-code index is ``index``:
        state i+1 = state i XOR v[rightmost zero bit of (index + i)]."""
        v = self.sobolstate.numpy()
        flips = v[:, _rightmost_zero(np.arange(index, index + n))].T  # (n, dimension)
        states = np.bitwise_xor.accumulate(flips, axis=0) ^ self.quasi.numpy()[None, :]
        return states

    @staticmethod
    def _check_n(n, op):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"SobolEngine.{op}: n must be an int, got {type(n).__name__}")
        if n < 0:
            raise ValueError(f"SobolEngine.{op}: n must be non-negative, got {n}")
        return int(n)

    def draw(self, n=1, out=None, dtype=None):
        """The next ``n`` points of the sequence, shape ``(n, dimension)``."""
        import fiamma

        n = self._check_n(n, "draw")
        if dtype is None:
            dtype = fiamma.get_default_dtype()
        if dtype not in (fiamma.float32, fiamma.float64):
            raise RuntimeError(f"SobolEngine.draw: dtype must be float32 or float64 (PyTorch's "
                               f"_sobol_engine_draw types), got {dtype}")
        np_dt = np.float32 if dtype == fiamma.float32 else np.float64
        if self.num_generated == 0:
            rest = n - 1
            first = [self._first_point.to(dtype).numpy()] if n >= 1 else []
            index = 0
        else:
            rest, first, index = n, [], self.num_generated - 1
        if rest > 0:
            states = self._advance(rest, index)
            self.quasi = fiamma.from_numpy(np.ascontiguousarray(states[-1]))
            # the integer state times 2**-30 in float64, rounded once to the dtype
            pts = (states.astype(np.float64) * (1.0 / (1 << self.MAXBIT))).astype(np_dt)
            first.append(pts)
        result = (np.concatenate(first, axis=0) if first else
                  np.zeros((0, self.dimension), np_dt))
        self.num_generated += n
        res = fiamma.from_numpy(np.ascontiguousarray(result))
        if out is not None:
            out.resize_as_(res).copy_(res)
            return out
        return res

    def draw_base2(self, m, out=None, dtype=None):
        """The next ``2**m`` points; the total drawn must stay a power of 2 (Sobol points
        are balanced in blocks of powers of 2)."""
        n = 2 ** m
        total = self.num_generated + n
        if total & (total - 1) != 0:
            raise ValueError("The balance properties of Sobol' points require n to be a power "
                             f"of 2. {self.num_generated} points have been previously "
                             f"generated, then: n={self.num_generated}+2**{m}={total}. If you "
                             "still want to do this, please use 'SobolEngine.draw()' instead.")
        return self.draw(n=n, out=out, dtype=dtype)

    def reset(self):
        """Back to the first point."""
        self.quasi = self.shift.clone()
        self.num_generated = 0
        return self

    def fast_forward(self, n):
        """Skip ``n`` points (as drawing them without using them)."""
        import fiamma

        n = self._check_n(n, "fast_forward")
        if self.num_generated == 0:
            rest, index = n - 1, 0
        else:
            rest, index = n, self.num_generated - 1
        if rest > 0:
            # XOR of the flips: each direction number flipped an odd number of times
            cols = _rightmost_zero(np.arange(index, index + rest))
            odd = np.bincount(cols, minlength=self.MAXBIT) % 2 == 1
            v = self.sobolstate.numpy()
            acc = np.bitwise_xor.reduce(v[:, odd], axis=1) if odd.any() else 0
            self.quasi = fiamma.from_numpy(np.ascontiguousarray(self.quasi.numpy() ^ acc))
        self.num_generated += n
        return self

    def __repr__(self):
        parts = [f"dimension={self.dimension}"]
        if self.scramble:
            parts.append("scramble=True")
        if self.seed is not None:
            parts.append(f"seed={self.seed}")
        return f"SobolEngine({', '.join(parts)})"
