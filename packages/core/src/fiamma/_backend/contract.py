"""The backend contract: the primitives a device implements. Public ops are written once, in
Python, over these (fiamma._ops.*); a backend is one module (or object) that provides them for
one device type, registered with fiamma._backend.register. docs/architecture.md ("Backends")
says how to add a device.

Conventions, for every primitive:

- **Operands are tensors** (fiamma.Tensor views: storage, dtype, shape, strides in elements,
  offset) of the backend's device. A primitive reads a tensor's dtype, data and, unless strides
  are passed beside it, its own strides. Where the op layer reads an operand through another
  layout (broadcast: zero strides; a flip: negative strides; a sub-block), it passes that
  layout explicitly: ``shape`` (the iteration shape) and per-operand strides (``sa``, ``sb``,
  ...), and for a region an element offset from the tensor's first element (``doff``).
- **Outputs are preallocated** by the op layer (fresh, contiguous unless stated) and written in
  place; a primitive never allocates a result the op layer sees.
- **dtypes are already decided**: the op layer promotes and casts; a primitive computes in the
  dtype of its (first) input operand unless a ``dtype`` argument names the compute dtype, and
  writes the output's dtype (bool for predicates). What each op accepts per dtype is the CPU
  backend's ``*_out_dtype`` tables (the ops' semantics on every device).
- **Op selectors** are the integers of codes.py (BIN_ADD, RED_SUM, ...).
- **Status**: every primitive returns 0 or a codes.ERR_* status (the op layer turns it into
  the op's error: ERR_DTYPE unsupported dtype, ERR_INDEX an index out of range, ERR_VALUE a bad
  value such as integer division by zero, ERR_NOMEM, ERR_ARG). A primitive checks every index
  it is given before writing anything; it never crashes on bad input.
- **Python scalars** travel as (double, int64) pairs (``fval``, ``ival``): the int64 one is used
  for integer dtypes (exact), the double for floating ones. ``binary`` takes the number itself
  as an operand, already a float or an int by the compute dtype.

Linear algebra (fiamma.linalg) is not a primitive family: on the CPU it is NumPy's LAPACK over
zero-copy views. A non-CPU backend runs the same code on its own arrays and so provides, beside
the primitives: ``xp`` (its array module), ``get(t)`` (tensor t as an array in its compute
dtype), ``put(t, values)`` (write an array into t, cast), ``asarray(a)`` (an array of its
module from NumPy) and ``linalg_errors()`` (a context in which its linalg raises
numpy.linalg.LinAlgError on singular input); the array-module backend (_backend/xp) has them.

The primitives are grouped by family below. ``Backend`` is a typing.Protocol: it documents the
signatures; tests/test_backend_contract.py checks that the CPU backend provides each one with
these parameter names.
"""

from typing import Protocol

__all__ = ["Backend", "FAMILIES"]


class Backend(Protocol):
    name: str  # the device type it runs ("cpu", "cuda", ...)

    # ---- memory: allocation, copies, fills, ranges ----------------------------------------
    def new_storage(self, dev, nbytes, zero=False):
        """A fresh storage of ``nbytes`` on device ``dev`` (zeroed if ``zero``): a
        fiamma.Storage subclass instance whose ``device`` is dev and ``backend`` this backend,
        ``ptr`` the address of its memory on the device; MemoryError when none is left."""

    def copy(self, dst, src):
        """``dst[...] = src`` cast to dst's dtype; same shape, any strides (both on this
        device). Overlap: the op layer passes non-overlapping or identical views."""

    def copy_region(self, shape, dst, doff, dstride, src, soff, sstride):
        """The view (shape, dstride) of dst starting ``doff`` elements after dst's first
        element receives the view (shape, sstride) of src from ``soff``, cast to dst's dtype.
        Strides may be negative or zero on the source side."""

    def fill(self, dst, fval, ival, use_int):
        """Every element of dst = ``ival`` (``use_int``) or ``fval``, converted to dst's dtype
        (bool: nonzero)."""

    def fill_region(self, shape, dst, off, stride, fval, ival, use_int):
        """fill() over the view (shape, stride) of dst starting ``off`` elements in."""

    def arange(self, dst, fstart, fstep, istart, istep):
        """dst (contiguous 1-d) = fstart + i * fstep computed in double (floating dtypes) or
        istart + i * istep in int64, wrapping (integer dtypes)."""

    def linspace(self, dst, start, end):
        """dst (contiguous 1-d, n elements) = PyTorch's symmetric linspace: start + i * step
        for i < n / 2, end - (n - 1 - i) * step after, step = (end - start) / (n - 1)."""

    def logspace(self, dst, start, end, base):
        """dst = base ** linspace(start, end), computed in double."""

    def from_host(self, dst, src_dtype, address):
        """dst (contiguous) = the contiguous host array of dst's element count and dtype
        ``src_dtype`` at integer ``address`` (a NumPy buffer kept alive by the caller), cast."""

    def to_host(self, src, address):
        """The contiguous src copied, unconverted, to host memory at integer ``address``
        (src's element count and dtype; the caller keeps that memory alive)."""

    def read_float(self, t, index=0):
        """Element ``index`` (counted in elements from t's first, not through strides) as a
        Python float (what ``.item()`` returns for floating dtypes)."""

    def read_int(self, t, index=0):
        """The same element as a Python int (integer and bool dtypes)."""

    def cat_rows(self, dst, parts, rows, dst_row_bytes, part_row_bytes):
        """Contiguous concatenation: dst and every part contiguous and of one dtype; for each
        of ``rows`` rows, dst's row (dst_row_bytes) is the parts' rows (part_row_bytes[k] each)
        side by side, in order."""

    # ---- elementwise: unary / binary / ternary over strided, broadcast operands -------------
    def unary(self, op, out, x, p0, p1, p2):
        """out = op(x) elementwise, same shape (codes.UN_*; p0..p2 the op's parameters:
        round's decimals, nan_to_num's replacements). Computes in x's dtype; out has the dtype
        unary_out_dtype(op, x) gives."""

    def binary(self, op, shape, out, a, sa, b, sb, params=None):
        """out = op(a, b) over ``shape`` (codes.BIN_*; comparisons write bool). a and b are
        tensors of one dtype, the compute dtype, read through strides sa and sb (zero along
        broadcast dims); or one of them is a Python number read as a constant of the other's
        dtype (a float for floating dtypes; an int within int64 for integer dtypes and bool,
        uint64 values above 2**63 - 1 as their two's complement) with strides None. ``params``:
        (p0, p1, p2) for the ops that take them (BIN_ADD_ALPHA: a + p0 * b; BIN_ISCLOSE: rtol,
        atol, equal_nan), else None. out is fresh or an operand-safe destination of that
        shape. The only binary primitive: a backend specialises inside it (the CPU's
        contiguous kernel, CUDA's float32 kernels)."""

    def ternary(self, op, dtype, shape, out, a, sa, b, sb, c, sc, bf, bi, cf, ci, p0):
        """out = op(a, b, c) computed in ``dtype`` (codes.TER_*: WHERE (a bool), CLAMP, LERP,
        ADDCMUL, ADDCDIV with p0 the scalar weight); b or c None means the scalar (bf, bi) or
        (cf, ci) instead."""

    def special_unary(self, op, out, x, p0):
        """out = op(x) for the special functions (codes.SP_*: lgamma, digamma, erfinv, ...;
        p0 the order of polygamma / mvlgamma, logit's eps); floating dtypes."""

    def special_binary(self, op, shape, out, a, sa, b, sb):
        """out = op(a, b) for SP_XLOGY, SP_XLOG1PY, SP_LOGADDEXP(2), SP_ZETA; floating."""

    # ---- reductions, scans, softmax -------------------------------------------------------
    def reduce(self, op, x, rmask, out, sout, aux, saux, p):
        """Reduce x over the dims set in bit mask ``rmask`` (codes.RED_*: SUM, PROD, MEAN, MAX,
        MIN, ARGMAX, ARGMIN, STD, VAR, NORM*, LSE, ALL, ANY, COUNTNZ, NANSUM, NANCOUNT). out
        (dtype reduce_out_dtype(op, x)) is written through strides ``sout`` of x's rank (0
        along reduced dims). ``aux`` (or None) is the index output of ARGMAX/ARGMIN (then out
        may be None: indices only) or the per-output input of STD/VAR (the mean) and LSE (the
        max), with strides ``saux``; p: NORMP's order, STD/VAR's correction."""

    def scan(self, op, x, out, dim):
        """out = the inclusive scan of x along dim (codes.SCAN_CUMSUM, SCAN_CUMPROD), out in
        scan_out_dtype(op, x); a 0-d x is one lane of one element."""

    def softmax(self, log, x, out, dim):
        """out = softmax of x along dim (``log``: log_softmax), stable (max subtracted)."""

    # ---- matmul ---------------------------------------------------------------------------
    def mm(self, m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, alpha, beta, ialpha, ibeta):
        """c (m x n, strides scm, scn) = alpha * a @ b + beta * c, a (m x k) and b (k x n) of
        any strides; floating dtypes use alpha/beta, integer ones ialpha/ibeta (wrapping), bool
        is OR of ANDs. c does not overlap a or b."""

    def matmul(self, batch, m, n, k, c, sc, a, sa, b, sb, alpha, beta, ialpha, ibeta):
        """mm() over the batch dims ``batch``: sc, sa, sb are strides of len(batch) + 2 (batch
        strides, 0 where an operand is broadcast, then its two matrix strides)."""

    def mm_bias(self, m, n, k, c, scm, a, sam, sak, b, sbk, sbn, bias):
        """Optional fusion: c = a @ b + bias (bias: n contiguous, added per row as c is
        stored; float32 on the CPU, any float dtype of c's on another device). Returns
        codes.ERR_OP where it does not apply: the op layer then copies the bias into c and
        calls mm with beta = 1."""

    # ---- index ops ------------------------------------------------------------------------
    def index_gather(self, shape, out, x, xoff, sx, idx, sidx, isize, istride, bad):
        """Advanced indexing: for every p in ``shape``, out[p] = x[xoff + p.sx + sum_j
        wrap(idx_j[p]) * istride[j]], idx a list of int64 tensors read with the flat strides
        sidx (len(idx) * ndim), isize[j] the size of the dim index j selects (values in
        [-isize, isize), negatives wrap). A bad index: ERR_INDEX with ``bad`` (a list, or None)
        set to [j, value]; nothing else happens."""

    def index_scatter(self, shape, dst, doff, sdst, val, sval, idx, sidx, isize, istride,
                      accumulate, bad):
        """The inverse of index_gather: dst[...] = val[p] (``accumulate``: +=). Every index is
        checked before the first write; with duplicates the last in row-major order wins."""

    def nonzero_count(self, shape, x, sx):
        """(status, the number of nonzero elements of the view (shape, sx) of x); NaN counts,
        -0.0 does not."""

    def nonzero(self, x, out, srow, scol, cap):
        """(status, count): the coordinates of x's nonzero elements in row-major order, the
        d-th coordinate of the i-th at out[i * srow + d * scol] (int64); at most cap rows
        (ERR_VALUE if x has more)."""

    def masked_select(self, shape, out, cap, x, sx, mask, smask):
        """(status, count): out (contiguous 1-d) = the elements of x (view shape, sx) where the
        bool mask (strides smask) is set, row-major; at most cap."""

    def masked_put(self, shape, dst, sdst, mask, smask, val, nval, sval):
        """The i-th selected element of dst (row-major where mask is set) = val[i * sval]
        (sval 0: every one gets val[0]); ERR_VALUE if more than nval are selected."""

    def ixop(self, mode, shape, a, sa, b, sb, idx, sidx, isize, istride, wrap, precheck, bad,
             init=None):
        """The dim-wise index ops (gather, scatter(_add/_reduce), index_select/add/copy/fill,
        take, put): at each p in shape, v = idx[p] (``wrap``: negatives + isize first) must be
        in [0, isize); t = b[p.sb + v * istride]; codes.IXOP_GATHER: a[p] = t; SCATTER:
        t = a[p]; ADD/MUL/MAX/MIN: t = op(t, a[p]) (bool ADD is or, MUL and; MAX/MIN propagate
        NaN). Visits p in row-major order (last write wins; accumulations in index order).
        ``precheck``: every index is checked before anything is written. ``init`` (or None): b
        (contiguous, fresh) first receives a copy of init. A bad index: ERR_INDEX, ``bad`` set
        to [value]."""

    def bincount(self, x, n, sx, w, sw, out, nbins, bad):
        """out[x[i]] += 1 (w None; out int64) or w[i] (out of w's dtype) for the n elements of
        the integer tensor x (stride sx; w stride sw); out zeroed by the caller. A value
        outside [0, nbins): ERR_INDEX, bad = [value]."""

    def histc(self, x, bins, lo, hi, edges, out):
        """out (int64, zeroed) += the histogram of the floating x over ``bins`` equal bins of
        [lo, hi] (``edges``: the bins + 1 edges as a float64 NumPy array); values outside and
        NaN are ignored, hi falls into the last bin."""

    # ---- sort / select --------------------------------------------------------------------
    def sort(self, shape, x, sx, dim, descending, values, sv, indices, si):
        """Stable sort of every lane of x (view shape, sx) along dim: values (or None) and
        int64 indices (or None: values only) written with strides sv and si. NaN sorts as the
        largest value."""

    def topk(self, shape, x, sx, dim, k, largest, values, sv, indices, si):
        """The k largest (``largest``) or smallest elements per lane, sorted, with indices."""

    def select(self, mode, shape, x, sx, dim, k, values, sv, indices, si):
        """Per lane: codes.SEL_KTH the k-th smallest, SEL_MEDIAN the lower median (NaN if the
        lane has one), SEL_NANMEDIAN the lower median of the non-NaN values, SEL_MODE the
        smallest most frequent value (last index); indices may be None."""

    def cumext(self, ismin, shape, x, sx, dim, values, sv, indices, si):
        """Running max (or min, ``ismin``) along dim with the index of each (last on ties)."""

    def searchsorted(self, nlanes, nseq, seq, seq_ls, sorter, sorter_ls, nval, vals, val_ls,
                     right, out, bad):
        """For each of nlanes lanes, the insertion points of its nval values (vals, lane stride
        val_ls) into its sorted sequence of nseq (seq, lane stride seq_ls; 0: one sequence for
        all), left or ``right``; ``sorter`` (int64 or None) gives the sorted order. out int64
        or int32, contiguous. A sorter entry out of range: ERR_INDEX, bad = [value]."""

    def unique_runs(self, n, m, data, order, origpos, first, inverse, counts):
        """(status, groups): group equal consecutive rows of the contiguous (n, m) data visited
        in ``order`` (int64 row numbers or None: 0..n-1); writes per group its first row (first)
        and size (counts, or None), and inverse[origpos[r]] (or inverse[r]) = the group of each
        visited row (inverse None: skipped). NaNs are never equal."""

    def sort_rows(self, n, m, data, perm):
        """perm (int64, n) = the stable lexicographic order of the contiguous (n, m) rows."""

    # ---- random: counter-based Philox4x32-10 ----------------------------------------------
    def rand_fill(self, dist, out, seed, offset, a, b):
        """out (contiguous) = draws of codes.RAND_* (UNIFORM [a, b), NORMAL mean a std b,
        BERNOULLI p = a, EXPONENTIAL, GEOMETRIC, LOGNORMAL, CAUCHY) from the Philox stream
        (seed, offset): value i uses block offset + i // 4 (32-bit draws) or i // 2; the same
        (seed, offset) gives the same values on every device."""

    def rand_int(self, out, seed, offset, low, rng):
        """out = low + [0, rng) (rng == 0 means 2**64), one 64-bit draw per value."""

    def rand_bernoulli_p(self, out, p, seed, offset, bad):
        """out[i] = 1 with probability p[i] (p contiguous float64); every p is checked to be in
        [0, 1] first (ERR_VALUE, bad = [flat index])."""

    def randperm(self, out, seed, offset):
        """out (int64, n) = a random permutation of 0..n-1."""

    def multinomial(self, probs, nsamp, replacement, out, seed, offset, info):
        """nsamp category indices per row of the contiguous float64 (rows, ncat) probs
        (unnormalised) into out (rows, nsamp) int64; without ``replacement`` none repeats in a
        row. Invalid rows: ERR_VALUE, info = [row, reason]."""

    # ---- fused kernels --------------------------------------------------------------------
    def conv(self, mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil, a, b, bias,
             out):
        """nd-d convolution (contiguous NC... operands): codes.CONV_FWD out = conv(a, weight b)
        + bias; CONV_BWD_DATA the transposed convolution (gradient w.r.t. the input);
        CONV_BWD_WEIGHT out = the weight gradient from input a and output gradient b;
        CONV_IM2COL / CONV_COL2IM unfold / fold. cb, cs: channels of the big and small
        sides."""

    def batch_norm_fwd(self, N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm, rvar, srv,
                       training, momentum, eps):
        """Batch norm of x viewed as (N, C, S) (strides xs) into contiguous y; writes the
        batch mean and 1/sqrt(var + eps) per channel; training updates rmean/rvar (strides
        srm, srv) by momentum, eval normalises with them. w, b, rmean, rvar may be None."""

    def batch_norm_bwd(self, N, C, S, g, gs, x, xs, w, mean, invstd, training, gx, gw, gb):
        """The gradients of batch_norm_fwd (gx, gw, gb each may be None: not computed)."""

    def row_norm_fwd(self, rms, M, K, x, sx, y, w, b, G, P, Sp, mean, rstd, eps):
        """Layer norm (``rms``: RMS norm, no mean) of M rows of K elements (row stride sx) with
        the affine weight/bias laid out as G groups x P channels x Sp positions; writes mean
        (None for rms) and rstd per row."""

    def row_norm_bwd(self, rms, M, K, g, sg, x, sx, w, G, P, Sp, mean, rstd, gx, gw, gb):
        """The gradients of row_norm_fwd (gx, gw, gb may be None; gw, gb accumulate)."""

    def pool_max(self, adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx):
        """Max pooling (or adaptive) of nplanes contiguous planes of 3-d size isz into osz
        (kernel k, stride s, padding p, dilation d, padded to 3 dims); idx (int64 flat
        positions in the plane, or None) receives the argmax."""

    def pool_avg(self, adaptive, nplanes, isz, osz, k, s, p, count_include_pad,
                 divisor_override, x, out):
        """Average pooling (or adaptive) with PyTorch's divisor rules."""

    def pool_avg_backward(self, adaptive, nplanes, isz, osz, k, s, p, count_include_pad,
                          divisor_override, gout, gin):
        """The gradient of pool_avg: gin (isz planes) from gout (osz planes)."""

    def pool_scatter(self, accumulate, nplanes, ssize, dsize, src, idx, dst, bad):
        """dst (zeroed planes of dsize) [idx] = (``accumulate``: +=) src per plane (max-pool
        backward, max_unpool). An index outside a plane: ERR_INDEX, bad = [value]."""

    def upsample(self, mode, align_corners, nsp, n, c, isize, osize, scales, x, xs, y):
        """interpolate: codes.SAMPLE_NEAREST, NEAREST_EXACT, LINEAR (bi/trilinear), CUBIC over
        nsp spatial dims (x strides xs; y contiguous); scales (per dim, 0 = from sizes)."""

    def upsample_backward(self, mode, align_corners, nsp, n, c, isize, osize, scales, gy, gx):
        """The gradient of upsample: gx (zeroed by the kernel) from contiguous gy."""

    def grid_sample(self, nsp, mode, padding, align_corners, n, c, isize, osize, x, xs, grid,
                    y):
        """grid_sample: y at each output position samples x at the normalised grid point
        (mode LINEAR, NEAREST, CUBIC; padding codes.PAD_ZEROS, PAD_BORDER, PAD_REFLECTION)."""

    def grid_sample_backward(self, nsp, mode, padding, align_corners, n, c, isize, osize, gy,
                             x, xs, grid, gx, ggrid):
        """The gradients of grid_sample w.r.t. x (gx, zeroed) and grid (ggrid); either None."""

    def adam_step(self, params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, lr, beta1, beta2,
                  eps, weight_decay, flags):
        """One Adam/AdamW update of lists of contiguous same-dtype tensors in place (flags:
        codes.OPT_MAXIMIZE, OPT_AMSGRAD (max_sqs given), OPT_DECOUPLED (AdamW)); steps: each
        parameter's step count after this update."""

    def sgd_step(self, params, grads, bufs, lr, momentum, dampening, weight_decay, flags):
        """One SGD update (flags: OPT_MAXIMIZE, OPT_NESTEROV, OPT_FIRST: the momentum buffers
        start as the gradient); bufs None without momentum."""

    def gelu_fwd(self, approximate, x, y):
        """GELU of the contiguous float32/float64 tensor x into y (same dtype and numel);
        approximate: codes.GELU_NONE (x Phi(x)) or codes.GELU_TANH (the tanh form)."""

    def gelu_bwd(self, approximate, g, x, out):
        """out = g * gelu'(x) (the backward of gelu_fwd); all contiguous, one float dtype."""

    def xent_fwd(self, n, c, x, target, weight, ignore_index, smoothing, loss, wt):
        """Cross entropy of the rows of the contiguous (n, c) float32/float64 x against the
        int64 (n,) class targets (csrc/api_xent.h has the formula): per-row loss and target
        weight wt (0 on rows whose target is ignore_index) into loss, wt (n, x's dtype);
        weight: (c,) or None; smoothing: the label smoothing in [0, 1]. A target outside
        [0, c) that is not ignore_index returns codes.ERR_INDEX."""

    def xent_bwd(self, n, c, x, target, weight, ignore_index, smoothing, g, gs, scale, gx):
        """The gradient of xent_fwd's loss w.r.t. x into gx ((n, c), x's dtype): row i scaled
        by g's element i * gs (gs 0: g's element 0 for every row) times ``scale``; 0 on
        ignored rows."""

    def attn_fwd(self, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms,
                 drop, out, os, lse):
        """Scaled dot-product attention (csrc/api_attn.h has the formula) of q (B, H, L, E)
        against k (B, Hk, S, E), v (B, Hk, S, Ev) (H a multiple of Hk: query head h reads
        key/value head h // (H // Hk)) into out (B, H, L, Ev) and the rows' log-sum-exp into
        the contiguous lse (B, H, L); qs, ks, vs, os: each operand's element strides for
        (batch, head, row), its last dim contiguous. mkind: codes.ATTN_NONE, ATTN_CAUSAL (top
        left), ATTN_ADD (mask of q's dtype added) or ATTN_BOOL (bool mask, False drops), mask
        read with the 4 strides ms (zero: broadcast); drop: None or the contiguous (B, H, L, S)
        dropout multipliers applied to the probabilities. One float dtype (float32/float64);
        fully masked rows give 0 and lse -inf."""

    def attn_bwd(self, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms,
                 drop, g, gs, lse, gq, gk, gv):
        """The gradients of attn_fwd's out (incoming g, strides gs) w.r.t. q, k, v into the
        contiguous gq, gk, gv (each may be None: not computed), from attn_fwd's lse."""

    def lstm_cell_fwd(self, B, H, gates, sg, cx, hy, cy, ws):
        """One LSTM step's arithmetic (csrc/api_lstm.h): gates (B, 4H) with row stride sg
        (order i, f, g, o), contiguous cx, hy, cy (B, H) and workspace ws (B, 4H): cy = f cx
        + i g, hy = o tanh(cy), ws = the activated gates; one float dtype."""

    def lstm_cell_bwd(self, B, H, ghy, gcy, cx, cy, ws, ggates, gcx):
        """The gradients of lstm_cell_fwd: ggates (B, 4H) and gcx (B, H; None: not computed)
        from ghy, gcy (either None: zero), cx, cy and the workspace."""

    def nms(self, boxes, scores, iou_threshold, keep, count):
        """Greedy non-maximum suppression of the contiguous (N, 4) xyxy ``boxes`` by the (N,)
        ``scores`` (one float dtype): the kept indices in decreasing score order (ties: lower
        index first) into the int64 (N,) ``keep``, their number into the int64 (1,)
        ``count``."""

    # ---- spectral -------------------------------------------------------------------------
    def stft(self, power, x, n_fft, hop, frames, pad, pad_mode, window, onesided, scale, out):
        """Short-time Fourier transform of the contiguous (B?, L) signal (padded by ``pad``,
        codes.STFT_PAD_*), windowed by ``window`` (NumPy, n_fft): out (B?, n_freq, frames, 2)
        (re, im), or |X|^2 (B?, n_freq, frames) with ``power``; scaled by ``scale``."""

    def fft(self, name, x, cin, conj, kwargs):
        """(status, result): numpy.fft's ``name`` (fft, ifft, rfft, irfft, hfft, ihfft, fftn,
        ifftn, rfftn, irfftn; NumPy's semantics and result dtypes) of the float32/float64
        tensor x, ``cin``: x's trailing dim of 2 holds (real, imag) pairs, read as complex;
        ``conj`` 1: conjugate the input first, 2: conjugate the result; ``kwargs``: the NumPy
        keyword arguments (n/s, axis/axes, norm). The one primitive that allocates its result
        (its shape is the transform's): a fresh tensor on x's device, real, or (..., 2) pairs
        for a complex result. Invalid sizes raise ValueError (as NumPy's)."""

    # ---- sparse: products with a CSR matrix ----------------------------------------------------
    def csr_mm(self, m, k, n, crow, col, vals, d, out, trans, bad):
        """out = S @ d (``trans`` false: S is m x k, d k x n, out m x n) or S^T @ d (``trans``:
        d m x n, out k x n), S the CSR matrix of offsets ``crow`` (m + 1 int64), plain indices
        ``col`` (nnz int64) and ``vals`` (nnz, float32 or float64; else ERR_DTYPE and the op
        layer composes the product); d and out contiguous, of vals's dtype. The structure is
        checked before anything is written (ERR_INDEX; ``bad``, a list or None, receives 0 for
        crow or 1 for col and the position)."""

    def csr_sddmm(self, m, k, n, crow, col, a, b, out, bad):
        """out[p] = dot(a[row(p)], b[col(p)]) for every stored entry p of the CSR structure
        (crow, col) of an m x k matrix: a (m x n), b (k x n), out (nnz,), all contiguous, float32
        or float64; checked as csr_mm."""


# The primitives of each family. The CPU backend (fiamma._backend.cpu) implements all of
# them; tests/test_backend_contract.py checks every one against the signatures above.

FAMILIES = {
    "memory": ["new_storage", "copy", "copy_region", "fill", "fill_region", "arange",
               "linspace", "logspace", "from_host", "to_host", "read_float", "read_int",
               "cat_rows"],
    "elementwise": ["unary", "binary", "ternary", "special_unary", "special_binary"],
    "reductions": ["reduce", "scan", "softmax"],
    "matmul": ["mm", "matmul", "mm_bias"],
    "index": ["index_gather", "index_scatter", "nonzero_count", "nonzero", "masked_select",
              "masked_put", "ixop", "bincount", "histc"],
    "sort": ["sort", "topk", "select", "cumext", "searchsorted", "unique_runs", "sort_rows"],
    "random": ["rand_fill", "rand_int", "rand_bernoulli_p", "randperm", "multinomial"],
    "fused": ["conv", "batch_norm_fwd", "batch_norm_bwd", "row_norm_fwd", "row_norm_bwd",
              "pool_max", "pool_avg", "pool_avg_backward", "pool_scatter", "upsample",
              "upsample_backward", "grid_sample", "grid_sample_backward", "adam_step",
              "sgd_step", "gelu_fwd", "gelu_bwd", "nms", "xent_fwd", "xent_bwd", "attn_fwd",
              "attn_bwd", "lstm_cell_fwd", "lstm_cell_bwd"],
    "spectral": ["stft", "fft"],
    "sparse": ["csr_mm", "csr_sddmm"],
}
