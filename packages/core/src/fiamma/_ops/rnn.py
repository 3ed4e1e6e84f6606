"""The LSTM cell's arithmetic fused (csrc/lstm.c on the CPU): one time step's gate
nonlinearities and cell update in one pass each way, as PyTorch's ``_thnn_fused_lstm_cell``.
The matrix products stay with the caller (``nn.LSTM`` runs them and uses these per step). Not
recorded for autograd: ``nn.LSTM`` wraps them in its own graph node, whose backward calls
:func:`fused_lstm_cell_backward`.

>>> import fiamma
>>> hy, cy, ws = fiamma.fused_lstm_cell(fiamma.zeros(1, 8), fiamma.ones(1, 2))
>>> cy.tolist()
[[0.5, 0.5]]
"""

from fiamma import _dtype as D, _grad_hook as G
from fiamma._backend import check
from fiamma._ops._common import cast
from fiamma._tensor import Tensor, new_empty

__all__ = ["fused_lstm_cell", "fused_lstm_cell_backward"]


def _check(op, gates, cx):
    for name, t in (("gates", gates), ("cx", cx)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
    if cx.dim() != 2 or gates.dim() != 2 or tuple(gates._shape) != (cx._shape[0],
                                                                     4 * cx._shape[1]):
        raise RuntimeError(f"{op}: expected gates (B, 4H) and cx (B, H), got "
                           f"{tuple(gates._shape)} and {tuple(cx._shape)}")
    if gates._dtype is not cx._dtype or gates._dtype._kind != 2:
        raise RuntimeError(f"{op}: expected gates and cx of one floating dtype, got "
                           f"{gates._dtype} and {cx._dtype}")
    if gates._storage.device != cx._storage.device:
        raise RuntimeError(f"{op}: expected all tensors on one device, got gates on "
                           f"{gates.device} and cx on {cx.device}")
    return D.float64 if cx._dtype is D.float64 else D.float32


def fused_lstm_cell(gates, cx):
    """``(hy, cy, workspace)`` of one LSTM step from the pre-activation gates (B, 4H: the
    input and hidden products plus biases, gate order i, f, g, o as PyTorch's) and the cell
    state cx (B, H): ``cy = sigmoid(f) * cx + sigmoid(i) * tanh(g)``, ``hy = sigmoid(o) *
    tanh(cy)``; the workspace (B, 4H, the activated gates) is for the backward.
    float16/bfloat16 compute in float32. Not differentiable (an error if an input requires
    grad in grad mode).

    >>> import fiamma
    >>> hy, cy, _ = fiamma.fused_lstm_cell(fiamma.zeros(2, 12), fiamma.zeros(2, 3))
    >>> hy.shape
    fiamma.Size([2, 3])
    """
    op = "fused_lstm_cell"
    cd = _check(op, gates, cx)
    if G.state.enabled and (gates.requires_grad or cx.requires_grad):
        raise RuntimeError(f"{op}: not differentiable itself (nn.LSTM records its own node); "
                           "call it under fiamma.no_grad()")
    B, H = cx._shape
    g = cast(gates, cd)
    if g._stride[1] != 1 or (B > 1 and g._stride[0] < 4 * H):
        g = g.contiguous()
    c = cast(cx, cd).contiguous()
    dev = cx._storage.device
    hy, cy, ws = (new_empty((B, H), cd, dev), new_empty((B, H), cd, dev),
                  new_empty((B, 4 * H), cd, dev))
    check(c._storage.backend.lstm_cell_fwd(B, H, g, g._stride[0] if B > 1 else 4 * H, c, hy,
                                           cy, ws), op)
    return cast(hy, cx._dtype), cast(cy, cx._dtype), ws


def fused_lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace):
    """``(grad_gates, grad_cx)`` of :func:`fused_lstm_cell` for the incoming gradients of hy
    and cy (either may be None: zero), from its cx, cy and workspace; one pass.

    >>> import fiamma
    >>> hy, cy, ws = fiamma.fused_lstm_cell(fiamma.zeros(1, 4), fiamma.ones(1, 1))
    >>> gg, gc = fiamma.fused_lstm_cell_backward(None, fiamma.ones(1, 1), fiamma.ones(1, 1),
    ...                                          cy, ws)
    >>> gc.tolist()
    [[0.5]]
    """
    op = "fused_lstm_cell_backward"
    if not isinstance(workspace, Tensor) or not isinstance(cx, Tensor):
        raise TypeError(f"{op}: expected workspace and cx to be Tensors")
    cd = D.float64 if cx._dtype is D.float64 else D.float32
    if cx.dim() != 2 or cx._dtype._kind != 2 or tuple(workspace._shape) != (
            cx._shape[0], 4 * cx._shape[1]):
        raise RuntimeError(f"{op}: expected a floating cx (B, H) and workspace (B, 4H), got "
                           f"{tuple(cx._shape)} ({cx._dtype}) and {tuple(workspace._shape)}")
    B, H = cx._shape
    for name, t in (("grad_hy", grad_hy), ("grad_cy", grad_cy), ("cy", cy)):
        if t is not None and (not isinstance(t, Tensor) or tuple(t._shape) != (B, H)):
            raise RuntimeError(f"{op}: expected {name} of shape {(B, H)}, got "
                               f"{tuple(getattr(t, 'shape', ()))}")
    if cy is None:
        raise TypeError(f"{op}: cy is required")
    dev = cx._storage.device

    def prep(t):
        return None if t is None else cast(t.detach(), cd).contiguous()

    gg, gc = new_empty((B, 4 * H), cd, dev), new_empty((B, H), cd, dev)
    check(cx._storage.backend.lstm_cell_bwd(B, H, prep(grad_hy), prep(grad_cy), prep(cx),
                                            prep(cy), prep(workspace), gg, gc), op)
    return cast(gg, cx._dtype), cast(gc, cx._dtype)
