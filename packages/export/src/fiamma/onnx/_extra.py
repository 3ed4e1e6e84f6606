"""ONNX converters for Fold (col2im), grid_sample, roll, EmbeddingBag and the linalg ops that
ONNX has an op or an exact decomposition for (det, slogdet, matrix_power n >= 0, cross,
matrix norms 'fro'/1/-1/inf/-inf, inv up to 3x3); every other linalg op raises naming it."""

import numpy as np

from ._converters import _kw, _onnx_type, _operand, converter
from ._fft import roll_axis
from ._reduce import _reduce_op

# ---- Fold / grid_sample / roll --------------------------------------------------------------


@converter("col2im")
def _col2im(ctx, node, outs):
    """nn.Fold: ONNX Col2Im (opset 18); at opset 17 a grouped ConvTranspose with one-hot
    kernels (the adjoint of the Unfold converter), output_padding reaching output_size."""
    x = node.args[0]
    kw = node.kwargs
    (oh, ow), (kh, kw_) = kw["output_size"], kw["kernel_size"]
    dil, pad, st = list(kw["dilation"]), list(kw["padding"]), list(kw["stride"])
    batched = ctx.rank(x) == 3
    y = ctx.name(x) if batched else ctx.add("Unsqueeze", [x, ctx.ints([0])])
    K = kh * kw_
    CK = ctx.shape(x)[-2]
    C = CK // K
    if ctx.opset >= 18:
        r = ctx.add("Col2Im", [y, ctx.ints([oh, ow]), ctx.ints([kh, kw_])], dilations=dil,
                    pads=pad + pad, strides=st)
    else:
        blocks = [(o + 2 * p - d * (k - 1) - 1) // s + 1
                  for o, p, d, k, s in zip((oh, ow), pad, dil, (kh, kw_), st)]
        y = ctx.add("Reshape", [y, ctx.ints([0, CK] + blocks)])
        w = np.zeros((CK, 1, kh, kw_), ctx.np_dtype(x))
        for c in range(C):
            for k in range(K):
                w[c * K + k, 0, k // kw_, k % kw_] = 1
        full = [(b - 1) * s + d * (k - 1) + 1 - 2 * p
                for b, s, d, k, p in zip(blocks, st, dil, (kh, kw_), pad)]
        r = ctx.add("ConvTranspose", [y, ctx.const(w, "fold")], group=C, strides=st,
                    dilations=dil, pads=pad + pad, kernel_shape=[kh, kw_],
                    output_padding=[o - f for o, f in zip((oh, ow), full)])
    if not batched:
        r = ctx.add("Squeeze", [r, ctx.ints([0])])
    return ctx.add("Identity", [r], outs)


_GRID_MODES = {0: ("bilinear", "linear"), 1: ("nearest", "nearest"), 2: ("bicubic", "cubic")}
_GRID_PAD = {0: "zeros", 1: "border", 2: "reflection"}


@converter("grid_sampler")
def _grid_sample(ctx, node, outs):
    x, grid = node.args[:2]
    kw = node.kwargs
    mode = _GRID_MODES.get(int(kw.get("interpolation_mode", 0)))
    pad = _GRID_PAD.get(int(kw.get("padding_mode", 0)))
    if mode is None or pad is None:
        ctx.unsupported(f"grid_sample mode {kw.get('interpolation_mode')} / padding "
                        f"{kw.get('padding_mode')} has no converter")
    if ctx.rank(x) != 4 and ctx.opset < 20:
        ctx.unsupported(f"grid_sample of a {ctx.rank(x)}-d input needs opset 20 or newer "
                        f"(export with opset_version=20), got {ctx.opset}")
    return ctx.add("GridSample", [x, _operand(ctx, grid, ctx.np_dtype(x))], outs,
                   mode=mode[ctx.opset >= 20], padding_mode=pad,
                   align_corners=int(bool(kw.get("align_corners"))))


@converter("roll")
def _roll(ctx, node, outs):
    x = node.args[0]
    shifts = _kw(node, "shifts", 1, None)
    dims = _kw(node, "dims", 2, None)
    shifts = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
    shape = ctx.shape(x)
    if dims is None:  # the flattened tensor, reshaped back
        if len(shifts) != 1:
            ctx.unsupported("roll without dims takes one shift")
        n = int(np.prod(shape))
        y = ctx.add("Reshape", [x, ctx.ints([-1])])
        y = roll_axis(ctx, y, 0, shifts[0] % n if n else 0)
        return ctx.add("Reshape", [y, ctx.add("Shape", [x])], outs)
    dims = list(dims) if isinstance(dims, (tuple, list)) else [dims]
    y = ctx.name(x)
    for s, d in zip(shifts, dims):
        d %= len(shape)
        y = roll_axis(ctx, y, d, s % shape[d] if shape[d] else 0)
    return ctx.add("Identity", [y], outs)


# ---- EmbeddingBag ---------------------------------------------------------------------------

def _scalar_size(ctx, x, axis):
    return ctx.add("Gather", [ctx.add("Shape", [x]), ctx.const(np.asarray(axis, np.int64))],
                   axis=0)


@converter("embedding_bag")
def _embedding_bag(ctx, node, outs):
    """Bags as a membership mask M [bags, indices] built in the file from the offsets (so other
    offsets and lengths run): sum = M @ rows, mean = sum / count (0 for an empty bag), max =
    the masked maximum (0 for an empty bag). padding_idx entries are left out of M."""
    ids, weight, offsets, psw = node.args[:4]
    kw = node.kwargs
    mode = kw["mode"]
    if kw.get("max_norm") is not None:
        ctx.unsupported("embedding_bag with max_norm (renormalises the weight in place) has "
                        "no converter")
    dt = ctx.np_dtype(weight)
    i64 = np.dtype(np.int64)
    flat_ids = _operand(ctx, ids, i64)
    two_d = ctx.rank(ids) == 2
    if two_d:
        flat_ids = ctx.add("Reshape", [flat_ids, ctx.ints([-1])])
    rows = ctx.add("Gather", [weight, flat_ids], axis=0)                  # [N, D]
    if psw is not None:
        w = ctx.add("Reshape", [_operand(ctx, psw, dt), ctx.ints([-1, 1])])
        rows = ctx.add("Mul", [rows, w])
    n = _scalar_size(ctx, flat_ids, 0)
    zero, one = (ctx.const(np.asarray(v, np.int64)) for v in (0, 1))
    pos = ctx.add("Unsqueeze", [ctx.add("Range", [zero, n, one]), ctx.ints([0])])  # [1, N]
    if two_d:
        step = _scalar_size(ctx, ids, 1)
        starts = ctx.add("Range", [zero, n, step])
        ends = ctx.add("Add", [starts, step])
    else:
        off = _operand(ctx, offsets, i64)
        big = np.iinfo(np.int64).max
        tail = ctx.add("Slice", [off, ctx.ints([1]), ctx.ints([big])])
        if kw.get("include_last_offset"):
            starts = ctx.add("Slice", [off, ctx.ints([0]), ctx.ints([-1])])
            ends = tail
        else:
            starts = off
            ends = ctx.add("Concat", [tail, ctx.add("Unsqueeze", [n, ctx.ints([0])])], axis=0)
    starts = ctx.add("Unsqueeze", [starts, ctx.ints([1])])
    ends = ctx.add("Unsqueeze", [ends, ctx.ints([1])])
    member = ctx.add("And", [ctx.add("GreaterOrEqual", [pos, starts]),
                             ctx.add("Less", [pos, ends])])                # [B, N]
    pidx = kw.get("padding_idx")
    if pidx is not None:
        pidx %= ctx.shape(weight)[0]
        keep = ctx.add("Not", [ctx.add("Equal", [flat_ids, ctx.ints([pidx])])])
        member = ctx.add("And", [member, ctx.add("Unsqueeze", [keep, ctx.ints([0])])])
    m = ctx.add("Cast", [member], to=_onnx_type(ctx, dt))
    count = _reduce_op(ctx, "ReduceSum", m, [1], True)                     # [B, 1]
    if mode == "max":
        mask3 = ctx.add("Unsqueeze", [member, ctx.ints([2])])            # [B, N, 1]
        r3 = ctx.add("Unsqueeze", [rows, ctx.ints([0])])                 # [1, N, D]
        ninf = ctx.const(np.asarray(-np.inf, dt))
        mx = _reduce_op(ctx, "ReduceMax", ctx.add("Where", [mask3, r3, ninf]), [1], False)
        empty = ctx.add("Equal", [count, ctx.const(np.asarray(0, dt))])
        return ctx.add("Where", [empty, ctx.const(np.asarray(0, dt)), mx], outs)
    s = ctx.add("MatMul", [m, rows])
    if mode == "sum":
        return ctx.add("Identity", [s], outs)
    return ctx.add("Div", [s, ctx.add("Max", [count, ctx.const(np.asarray(1, dt))])], outs)


# ---- linalg ---------------------------------------------------------------------------------

@converter("linalg_det")
def _det(ctx, node, outs):
    return ctx.add("Det", [node.args[0]], outs)


@converter("linalg_inv")
def _inv(ctx, node, outs):
    """The inverse of 1x1, 2x2 and 3x3 matrices as the adjugate over the determinant (an exact
    formula; ONNX has no inverse op, so larger matrices are refused)."""
    x = node.args[0]
    n = ctx.shape(x)[-1]
    if n > 3:
        ctx.unsupported(f"linalg_inv of {n}x{n} matrices (ONNX has no inverse operator; the "
                        "exact adjugate formula is used up to 3x3)")
    y = ctx.name(x)

    def e(i, j):
        return ctx.add("Slice", [y, ctx.ints([i % n, j % n]), ctx.ints([i % n + 1, j % n + 1]),
                                 ctx.ints([-2, -1])])

    if n == 1:
        return ctx.add("Reciprocal", [y], outs)
    if n == 2:
        cof = {(0, 0): e(1, 1), (1, 1): e(0, 0), (0, 1): ctx.add("Neg", [e(1, 0)]),
               (1, 0): ctx.add("Neg", [e(0, 1)])}
    else:  # cyclic indices give the signed cofactors of a 3x3 matrix
        cof = {(i, j): ctx.add("Sub", [ctx.add("Mul", [e(i + 1, j + 1), e(i + 2, j + 2)]),
                                       ctx.add("Mul", [e(i + 1, j + 2), e(i + 2, j + 1)])])
               for i in range(3) for j in range(3)}
    det = ctx.add("Unsqueeze", [ctx.add("Det", [y]), ctx.ints([-1, -2])])
    rows = [ctx.add("Concat", [cof[(j, i)] for j in range(n)], axis=-1) for i in range(n)]
    return ctx.add("Div", [ctx.add("Concat", rows, axis=-2), det], outs)


@converter("linalg_slogdet")
def _slogdet(ctx, node, outs):
    d = ctx.add("Det", [node.args[0]])
    ctx.add("Sign", [d], outs[0])
    return ctx.add("Log", [ctx.add("Abs", [d])], outs[1])


@converter("linalg_matrix_power")
def _matrix_power(ctx, node, outs):
    x = node.args[0]
    n = int(node.kwargs.get("n", node.args[1] if len(node.args) > 1 else 1))
    if n < 0:
        ctx.unsupported("linalg_matrix_power with a negative power (needs a matrix inverse, "
                        "which ONNX has no op for)")
    shape = ctx.shape(x)
    if n == 0:
        eye = np.broadcast_to(np.eye(shape[-1], dtype=ctx.np_dtype(x)), shape)
        return ctx.add("Identity", [ctx.const(np.ascontiguousarray(eye), "eye")], outs)
    result, base = None, ctx.name(x)
    while n:  # square-and-multiply: the products numpy's matrix_power forms
        if n & 1:
            result = base if result is None else ctx.add("MatMul", [result, base])
        n >>= 1
        if n:
            base = ctx.add("MatMul", [base, base])
    return ctx.add("Identity", [result], outs)


@converter("linalg_cross")
def _cross(ctx, node, outs):
    a, b = node.args[:2]
    dt = ctx.np_dtype(node.outputs[0])
    rank = max(ctx.rank(a), ctx.rank(b))
    d = int(node.kwargs.get("dim", -1)) % rank
    xa, xb = _operand(ctx, a, dt), _operand(ctx, b, dt)

    def comp(x, i):
        return ctx.add("Slice", [x, ctx.ints([i]), ctx.ints([i + 1]), ctx.ints([d])])

    parts = []
    for i, j in ((1, 2), (2, 0), (0, 1)):
        parts.append(ctx.add("Sub", [ctx.add("Mul", [comp(xa, i), comp(xb, j)]),
                                     ctx.add("Mul", [comp(xa, j), comp(xb, i)])]))
    return ctx.add("Concat", parts, outs, axis=d)


@converter("linalg_matrix_norm")
def _matrix_norm(ctx, node, outs):
    x = node.args[0]
    kw = node.kwargs
    ord_, keep = kw.get("ord", "fro"), bool(kw.get("keepdim", False))
    r = ctx.rank(x)
    d0, d1 = (int(d) % r for d in kw.get("dim", (-2, -1)))
    y = ctx.name(x)
    if kw.get("dtype") is not None:
        y = ctx.add("Cast", [y], to=_onnx_type(ctx, ctx.np_dtype(node.outputs[0])))
    if ord_ == "fro":
        return ctx.add("Sqrt", [_reduce_op(ctx, "ReduceSum", ctx.add("Mul", [y, y]),
                                           [d0, d1], keep)], outs)
    if ord_ in (1, -1, float("inf"), float("-inf")):
        inner, outer = (d0, d1) if ord_ in (1, -1) else (d1, d0)  # column / row sums
        s = _reduce_op(ctx, "ReduceSum", ctx.add("Abs", [y]), [inner], True)
        op = "ReduceMax" if ord_ > 0 else "ReduceMin"
        m = _reduce_op(ctx, op, s, [outer], True)
        if keep:
            return ctx.add("Identity", [m], outs)
        return ctx.add("Squeeze", [m, ctx.ints(sorted((d0, d1)))], outs)
    ctx.unsupported(f"linalg_matrix_norm with ord={ord_!r} (needs singular values, which ONNX "
                    "has no op for)")


_NO_ONNX = {
    "inv_ex": "a matrix inverse", "pinv": "a pseudo-inverse",
    "solve": "a linear solve", "solve_ex": "a linear solve",
    "solve_triangular": "a triangular solve", "lstsq": "a least-squares solve",
    "cholesky": "a Cholesky factorisation", "cholesky_ex": "a Cholesky factorisation",
    "qr": "a QR factorisation", "svd": "an SVD", "svdvals": "an SVD",
    "eigh": "an eigendecomposition", "eigvalsh": "an eigendecomposition",
    "eig": "an eigendecomposition", "eigvals": "an eigendecomposition",
    "cond": "singular values", "matrix_rank": "singular values", "lu": "an LU factorisation",
    "lu_factor": "an LU factorisation", "lu_factor_ex": "an LU factorisation",
    "lu_solve": "an LU solve", "matrix_exp": "a matrix exponential",
}


def no_converter_reason(op):
    """Why ``op`` (a linalg op) cannot be exported, or None."""
    what = _NO_ONNX.get(op[len("linalg_"):]) if op.startswith("linalg_") else None
    if what is None:
        return None
    return (f"{op} needs {what}, which ONNX has no operator or exact decomposition for; "
            "compute it outside the exported graph")
