"""The typed seam between core and an autograd engine (public through ``fiamma.autograd_hook``).

Two things live here, both part of core's documented contract with fiamma-autograd:

**Recorded-op keys.** Every op that core passes to the recorder (``record(op, ...)``,
``record_inplace(op, ...)``) is declared once in :data:`ops`, a table of :class:`OpKey` objects.
A derivative formula is registered for the key object (``ops.mul``), not for a name: a misspelled
key is an ``AttributeError`` when the formula's module is imported, and fiamma-autograd checks at
import that every differentiable key has a formula, so a missing derivative cannot reach a user.
An :class:`OpKey` is a ``str`` subclass equal to (and hashing as) the op's name, so core's record
calls and the trace hook's contract (``op`` is the public op name) are unchanged and looking a
recorded op up costs what a string lookup costs.

**Tensor accessors.** What an engine reads and writes on a tensor besides its public API: the
in-place version counter (shared by all views of a storage), the per-tensor autograd metadata
slot, whether two tensors share memory, a tensor's geometry, and whether a tensor's memory is
private to it (so a gradient can become ``.grad`` without a copy). Engines call these functions
instead of reading Tensor's private slots. The few reads on the per-op recording path and the
per-node backward path stay direct slot reads, because a Python call there would cost more than
the read itself; those slots are listed in :data:`HOT_SLOTS` with their meaning, and
core's tests pin them (tests/test_autograd_api.py).

>>> from fiamma.autograd_hook import ops
>>> ops.mul == "mul", ops.mul.differentiable, ops.transpose.is_view
(True, True, True)
"""

import sys

__all__ = ["OpKey", "OpTable", "ops", "declare_op", "version", "same_storage", "get_meta",
           "set_meta", "clear_base", "shape", "geometry", "owns_memory", "HOT_SLOTS"]

_getrefcount = sys.getrefcount


class OpKey(str):
    """The key of one recorded op: equal to its name, plus what the engine must know about it.

    ``differentiable``: whether a derivative formula must exist (False for ops whose results
    are never differentiated, e.g. comparisons, even where they return floats). ``is_view``:
    the op's result is a view of input 0 (an in-place op on it rewrites the base's history).
    Create keys with :func:`declare_op` only; there is one key object per name."""

    @property
    def name(self):
        return str.__str__(self)

    def __repr__(self):
        return f"ops.{self.name}"


class OpTable:
    """The declared ops by name: ``ops.add`` (attribute), ``ops["add"]`` (item), ``"add" in
    ops``, iteration over the keys. An unknown name raises, naming it (``ops.mull``:
    AttributeError, with Python's "Did you mean: 'mul'?")."""

    # each key is an instance attribute and the class has no __getattr__, so ``ops.mul`` is a
    # specialised attribute load (~10 ns; record sites evaluate it at every call, and a
    # __getattr__ hook made it ~440 ns, a module subclass ~28 ns)
    def __init__(self):
        object.__setattr__(self, "_keys", {})

    def __setattr__(self, name, value):
        raise AttributeError("fiamma.autograd_hook.ops is read-only: use declare_op")

    def __getitem__(self, name):
        try:
            return self._keys[name]
        except KeyError:
            raise KeyError(f"fiamma.autograd_hook.ops: core records no op named {name!r}") \
                from None

    def get(self, name, default=None):
        return self._keys.get(name, default)

    def __contains__(self, name):
        return name in self._keys

    def __iter__(self):
        return iter(self._keys.values())

    def __len__(self):
        return len(self._keys)

    def __dir__(self):
        return list(self._keys)

    def __repr__(self):
        return f"<fiamma.autograd_hook.ops: {len(self._keys)} recorded ops>"

    def declare(self, name, *, differentiable=True, is_view=False):
        """Declare ``name`` in this table and return its :class:`OpKey` (see :func:`declare_op`;
        a separate table serves tests of an engine's registry)."""
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"declare_op: expected an op name (an identifier), got {name!r}")
        if hasattr(OpTable, name) or (name in self.__dict__ and name not in self._keys):
            raise ValueError(f"declare_op: {name!r} is an attribute of the table itself")
        key = self._keys.get(name)
        if key is not None:
            if key.differentiable != bool(differentiable) or key.is_view != bool(is_view):
                raise ValueError(f"declare_op: {name!r} is already declared with "
                                 f"differentiable={key.differentiable}, is_view={key.is_view}")
            return key
        key = OpKey(name)
        key.differentiable = bool(differentiable)
        key.is_view = bool(is_view)
        self._keys[name] = key
        object.__setattr__(self, sys.intern(name), key)  # interned: a specialised load
        return key


ops = OpTable()


def declare_op(name, *, differentiable=True, is_view=False):
    """Declare that ``name`` is passed to the recorder, and return its :class:`OpKey`.

    Core declares every op it records below; a distribution that records ops of its own through
    ``fiamma.autograd_hook`` declares them the same way before registering their formulas.
    Declaring a name again with the same flags returns the existing key; other flags raise.

    >>> from fiamma.autograd_hook import declare_op, ops
    >>> declare_op("mul") is ops.mul
    True
    """
    return ops.declare(name, differentiable=differentiable, is_view=is_view)


# Every op name core's ops pass to record/record_inplace. A new recording op is declared here
# (``no_gradient``: a result that requires grad when its inputs do, as PyTorch's, but whose
# backward gives them no gradient: an empty householder_product, lstsq's empty residuals)
# (tests/test_formulas_coverage.py in fiamma-autograd finds the names core's source records and
# checks that each is declared; the engine refuses an undeclared name when it first records it).
_DIFFERENTIABLE = """
    abs acos acosh adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d
    adaptive_avg_pool_backward adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d add
    addbmm addbmm_ addcdiv addcmul addmm addmm_ addmv addmv_ addr addr_ amax amin aminmax angle
    asin asinh atan atan2 atanh avg_pool1d avg_pool2d avg_pool3d avg_pool_backward baddbmm
    baddbmm_ batch_norm batch_norm_backward bernoulli bernoulli_ block_diag bmm cat cauchy_ ceil
    clamp
    clone col2im complex conj convolution convolution_backward_weight copy_ copysign cos cosh
    cross_entropy_loss cummax cummin cumprod cumsum diag diag_embed diagflat diff digamma div
    dot entr erf erfc erfcx erfinv exp exp2 expm1 exponential_ fft_fft fft_fft2 fft_fftn
    fft_hfft fft_hfft2 fft_hfftn fft_ifft fft_ifft2 fft_ifftn fft_ihfft fft_ihfft2 fft_ihfftn
    fft_irfft fft_irfft2 fft_irfftn fft_rfft fft_rfft2 fft_rfftn fftshift fill_ flip float_power
    floor floor_divide fmax fmin fmod frac fused_attention gammainc gammaincc gather gelu
    gelu_backward geometric_ grid_sampler grid_sampler_backward_grid grid_sampler_backward_input
    group_norm group_norm_backward hypot i0 i0e i1 i1e ifftshift im2col index index_add
    index_add_ index_copy index_copy_ index_fill index_fill_ index_put index_put_ index_select
    inner istft kthvalue layer_norm layer_norm_backward lerp lgamma linalg_cholesky
    linalg_cholesky_ex linalg_cond linalg_cross linalg_det linalg_eig linalg_eigh linalg_eigvals
    linalg_eigvalsh linalg_inv linalg_inv_ex linalg_lstsq linalg_lu linalg_lu_factor
    linalg_lu_factor_ex linalg_lu_solve linalg_matrix_norm linalg_matrix_power
    linalg_pinv linalg_qr linalg_slogdet linalg_solve linalg_solve_triangular linalg_svd
    linalg_svdvals load log log10 log1p log2 log_ndtr log_normal_ log_sigmoid log_softmax
    logaddexp logaddexp2 logit logsumexp lu_unpack masked_fill masked_fill_ masked_scatter
    masked_scatter_
    masked_select matmul max max_pool1d max_pool2d max_pool3d max_pool_backward max_unpool1d
    max_unpool2d max_unpool3d maximum mean median min minimum mm mode mul mv mvlgamma nan_to_num
    nanmean nanmedian nansum ndtr ndtri neg norm normal_ pad polygamma pow prod put put_ random_
    reciprocal relu relu_backward remainder repeat repeat_interleave rms_norm rms_norm_backward
    roll rot90 round rsqrt scatter scatter_ scatter_add scatter_add_ scatter_reduce
    scatter_reduce_ setitem sgn sigmoid sign sin sinc sinh softmax sort sqrt square std std_mean
    stft stft_power sub sum take take_along_dim tan tanh to topk tril tril_ triu triu_ trunc
    uniform_ upsample upsample_backward var var_mean vdot view_as_complex view_as_real where
    xlog1py xlogy zeta
    silu leaky_relu elu hardswish hardsigmoid softplus mish hardtanh softshrink hardshrink
    threshold
    mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy nll_loss embedding
    binary_cross_entropy_with_logits soft_margin_loss kl_div
    sparse_csr_mm sparse_csr_sddmm
    no_gradient
"""
_VIEWS = """
    as_strided diagonal expand getitem imag narrow permute real select squeeze t transpose
    unfold unsqueeze view
    split split_with_sizes unbind
"""
_NON_DIFFERENTIABLE = """
    all any bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift
    bitwise_xor eq equal ge gt histc isclose isfinite isinf isnan isneginf isposinf le
    logical_and logical_not logical_or logical_xor lt ne signbit
"""

for _n in _DIFFERENTIABLE.split():
    declare_op(_n)
for _n in _VIEWS.split():
    declare_op(_n, is_view=True)
for _n in _NON_DIFFERENTIABLE.split():
    declare_op(_n, differentiable=False)
del _n


# ---- tensor accessors ---------------------------------------------------------------------------

def version(t):
    """The in-place version counter of ``t``'s storage (shared by every view of it; each in-place
    write adds 1). A saved tensor whose version changed was overwritten."""
    return t._storage.version


def same_storage(a, b):
    """Whether tensors ``a`` and ``b`` view the same storage (memory)."""
    return a._storage is b._storage


def get_meta(t):
    """The autograd engine's per-tensor data (None until :func:`set_meta`; core never reads it,
    only resets it to None on new tensors and on ``detach``-style aliases)."""
    return t._ag


def set_meta(t, meta):
    """Store the engine's per-tensor data ``meta`` on ``t`` (None clears it)."""
    t._ag = meta


def clear_base(t):
    """Make ``t`` no view to an engine (``getattr(t, "_base", None)`` is None afterwards): for a
    result that an op built as a view of its own temporary, which is a fresh tensor to
    autograd. The memory is unchanged (the temporary stays alive through the storage)."""
    t._base = None


def shape(t):
    """``t``'s shape as a plain tuple of ints (``t.shape`` is a ``fiamma.Size``); the same
    object on every call, so storing it costs nothing and the cyclic GC does not track it."""
    return t._shape


def geometry(t):
    """``(shape, stride, storage_offset)`` of ``t`` in elements, as ``as_strided`` takes them."""
    return t._shape, t._stride, t._offset


def owns_memory(t, refs):
    """Whether the contiguous tensor ``t`` is held by at most ``refs`` references of the caller
    (besides this call's own) and its memory is reachable through ``t`` alone: not a view, or a
    view over all the elements of a base that nothing but ``t`` holds. Then nothing can observe
    ``t`` being kept (as a ``.grad``) instead of copied."""
    # references counted by getrefcount: the caller's ``refs``, this call's parameter, the
    # argument of getrefcount itself
    if not t._contig or _getrefcount(t) > refs + 2:
        return False
    b = getattr(t, "_base", None)
    if b is None:
        return _getrefcount(t._storage) <= 2     # t's slot, getrefcount's argument
    # references to b: t's _base slot, the local b, getrefcount's argument
    return _getrefcount(b) <= 3 and b._numel == t._numel and _getrefcount(t._storage) <= 3


# The slots an engine may read directly on its per-op and per-node paths (a function call there
# costs more than the read; see docs/architecture.md, "The core/autograd seam"). Their meaning
# is part of core's contract and pinned by tests/test_autograd_api.py.
HOT_SLOTS = {
    "_ag": "the engine's per-tensor data (get_meta/set_meta)",
    "_shape": "the shape as a plain tuple of ints (shape)",
    "_dtype": "the fiamma.dtype; ``_dtype._kind`` is 2 for floating, 3 for complex dtypes",
    "_storage": "the storage: compare with ``is`` (same_storage); ``.version`` is version(t)",
}
