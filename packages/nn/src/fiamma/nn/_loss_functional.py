"""Loss functions (``torch.nn.functional`` losses). The elementwise ones (mse, l1, smooth_l1,
huber, binary cross entropy with and without logits, soft margin, kl_div) are core's fused
losses (``fiamma.fused.loss``: one C pass each way, one autograd node with PyTorch's name) for
floating-point operands; the others, and the rare cases the fused op does not take (integer or
complex operands, a weight that requires grad), are composed of differentiable core ops, so
their gradients (and higher-order gradients) come from autograd's formulas."""

import math
import warnings

import fiamma
from fiamma import fused as _fused
from fiamma.autograd_hook import get_trace_hook as _trace_hook
from fiamma.nn._named_loss import as_node

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "cross_entropy",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "multi_margin_loss",
           "multilabel_margin_loss", "multilabel_soft_margin_loss", "soft_margin_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss"]


def _reduce(loss, reduction, op):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: {reduction} is not a valid value for reduction")


def _reduce_check(reduction, op):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")


def _check_pair(input, target, op, stacklevel=3):
    if not isinstance(input, fiamma.Tensor) or not isinstance(target, fiamma.Tensor):
        raise TypeError(f"{op}: input and target must be Tensors")
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({fiamma.Size(target.shape)}) that is different to "
                      f"the input size ({fiamma.Size(input.shape)}). This will likely lead to "
                      "incorrect results due to broadcasting. Please ensure they have the same "
                      "size.", UserWarning, stacklevel=stacklevel)


def _fusable(input, target, *weights):
    """Whether core's fused loss takes these operands: float tensors, weights that need no
    gradient."""
    if not isinstance(input, fiamma.Tensor):
        return False
    if not (input.dtype.is_floating_point and isinstance(target, fiamma.Tensor)
            and target.dtype.is_floating_point):
        return False
    for w in weights:
        if w is not None and (not isinstance(w, fiamma.Tensor) or not w.dtype.is_floating_point
                              or (w.requires_grad and fiamma.is_grad_enabled()
                                  and _trace_hook() is None)):
            return False  # (a trace marks what it follows as requiring grad)
    return True


def _pointwise_pair(input, target, op):
    _check_pair(input, target, op, stacklevel=4)
    return input - target


def _mse(input, target, reduction):
    d = input - target
    return _reduce(d * d, reduction, "mse_loss")


def mse_loss(input, target, reduction="mean"):
    """Mean squared error ``(input - target)^2``; one autograd node, ``MseLossBackward0``."""
    _check_pair(input, target, "mse_loss")
    if _fusable(input, target):
        return _fused.loss("mse_loss", input, target, reduction=reduction)
    _reduce_check(reduction, "mse_loss")
    return as_node("MseLossBackward0", _mse, (input, target), reduction)


def l1_loss(input, target, reduction="mean"):
    """Mean absolute error; one autograd node, ``L1LossBackward0``."""
    if _fusable(input, target):
        _check_pair(input, target, "l1_loss")
        return _fused.loss("l1_loss", input, target, reduction=reduction)
    return _reduce(_pointwise_pair(input, target, "l1_loss").abs(), reduction, "l1_loss")


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (beta 0: L1)."""
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if _fusable(input, target):
        _check_pair(input, target, "smooth_l1_loss")
        if beta == 0:  # L1, as PyTorch (its node is L1LossBackward0)
            return _fused.loss("l1_loss", input, target, reduction=reduction)
        return _fused.loss("smooth_l1_loss", input, target, reduction=reduction,
                           param=float(beta))
    a = _pointwise_pair(input, target, "smooth_l1_loss").abs()
    if beta == 0:
        return _reduce(a, reduction, "smooth_l1_loss")
    loss = fiamma.where(a < beta, 0.5 * a * a / beta, a - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def _as_input_dtype(input, target):
    """PyTorch's huber_loss and soft_margin_loss compute in the input's floating dtype (a
    float64 target with a float32 input gives a float32 loss; mse_loss and l1_loss promote)."""
    if isinstance(input, fiamma.Tensor) and isinstance(target, fiamma.Tensor) \
            and target.dtype is not input.dtype and input.dtype.is_floating_point \
            and target.dtype.is_floating_point:
        return target.to(input.dtype)
    return target


def huber_loss(input, target, reduction="mean", delta=1.0):
    """``0.5 d^2`` where ``|d| <= delta``, else ``delta (|d| - 0.5 delta)``."""
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    target = _as_input_dtype(input, target)
    if _fusable(input, target):
        _check_pair(input, target, "huber_loss")
        return _fused.loss("huber_loss", input, target, reduction=reduction, param=float(delta))
    a = _pointwise_pair(input, target, "huber_loss").abs()
    loss = fiamma.where(a <= delta, 0.5 * a * a, delta * (a - 0.5 * delta))
    return _reduce(loss, reduction, "huber_loss")


def _class_dim_input(input, target, op):
    """Inputs (C,), (N, C) or (N, C, d1, ...): the target has the input's shape without C."""
    if input.dim() == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension (classes), got 0-d")
    class_dim = 0 if input.dim() == 1 else 1
    expect = tuple(input.shape[:class_dim]) + tuple(input.shape[class_dim + 1:])
    if tuple(target.shape) != expect:
        raise ValueError(f"{op}: expected target of shape {list(expect)} for input of shape "
                         f"{list(input.shape)}, got {list(target.shape)}")
    return class_dim


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log likelihood of the target classes: ``-weight[t] * input[n, t]``; targets
    equal to ``ignore_index`` contribute nothing (and do not count in the mean). Input (C,),
    (N, C) or (N, C, d1, ..., dk); one autograd node, ``NllLossBackward0`` (core's
    ``fiamma.fused.nll_loss``), unless the weight requires grad (then a composition, which
    differentiates it; PyTorch refuses)."""
    op = "nll_loss"
    if not isinstance(input, fiamma.Tensor) or not isinstance(target, fiamma.Tensor):
        raise TypeError(f"{op}: expected input and target to be Tensors, got "
                        f"{type(input).__name__} and {type(target).__name__}")
    if target.dtype.is_floating_point or target.dtype is fiamma.bool or target.dtype.is_complex:
        raise RuntimeError(f"{op}: expected target of an integer dtype (class indices), got "
                           f"{target.dtype}")
    if input.dtype.is_floating_point and (weight is None or not (
            weight.requires_grad and fiamma.is_grad_enabled())):
        return _fused.nll_loss(input, target, weight, reduction, ignore_index)
    class_dim = _class_dim_input(input, target, op)
    n_classes = input.shape[class_dim]
    if weight is not None and tuple(weight.shape) != (n_classes,):
        raise RuntimeError(f"{op}: weight tensor should be defined either for all "
                           f"{n_classes} classes or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
    _reduce_check(reduction, op)
    target = target.long()
    ignored = target == ignore_index
    bad = (~ignored) & ((target < 0) | (target >= n_classes))
    if bool(bad.any()):
        raise IndexError(f"{op}: Target {target[bad].reshape(-1)[0].item()} is out of bounds "
                         f"(expected 0 <= target < {n_classes}).")
    safe = fiamma.where(ignored, 0, target)
    picked = input.gather(class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim)
    w = weight[safe] if weight is not None else fiamma.ones_like(picked)
    w = w.masked_fill(ignored, 0.0).to(picked.dtype)
    loss = -(picked * w)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction, op)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """``log_softmax`` over the class dimension, then the negative log likelihood of class
    targets (or of a target distribution of the input's shape), with optional class weights,
    ``ignore_index`` and ``label_smoothing`` (PyTorch's formulas)."""
    op = "cross_entropy"
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0. Got: "
                         f"{label_smoothing}")
    if input.dim() == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension (classes), got 0-d")
    if not target.dtype.is_floating_point and input.dtype.is_floating_point and \
            (weight is None or not (weight.requires_grad and fiamma.is_grad_enabled())):
        # class indices: log_softmax and nll in one fused op each way (core's)
        return fiamma.cross_entropy_loss(input, target, weight, reduction, ignore_index,
                                         label_smoothing)
    class_dim = 0 if input.dim() == 1 else 1
    n_classes = input.shape[class_dim]
    logp = input.log_softmax(class_dim)
    wshape = [1] * input.dim()
    wshape[class_dim] = n_classes
    w_ = weight.reshape(wshape) if weight is not None else None
    if target.dtype.is_floating_point:  # class probabilities
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"{op}: a probability target must have the input's shape "
                             f"{list(input.shape)}, got {list(target.shape)}")
        if ignore_index >= 0:  # PyTorch refuses a class to ignore with probabilities
            raise RuntimeError(f"{op}: ignore_index is not supported for floating point "
                               f"target, got ignore_index={ignore_index}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target if w_ is None else logp * target * w_
        loss = -prod.sum(class_dim)
        if reduction == "mean":
            count = input.numel() // n_classes if n_classes else 0
            return loss.sum() / count if count else loss.sum() * float("nan")
        return _reduce(loss, reduction, op)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0:
        return nll
    ignored = target.long() == ignore_index
    smooth = -(logp if w_ is None else logp * w_).sum(class_dim)
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == "mean":
        if weight is not None:
            safe = fiamma.where(ignored, 0, target.long())
            denom = weight[safe].masked_fill(ignored, 0.0).sum()
        else:
            denom = (~ignored).sum()
        ret = smooth.sum() / denom
    else:
        ret = _reduce(smooth, reduction, op)
    return (1 - label_smoothing) * nll + ret * (label_smoothing / n_classes)


# PyTorch's floor on x (1 - x) in the BCE gradient, so saturated inputs give finite gradients:
# a float constant 1e-12, i.e. this double in float64 computations
_BCE_EPS = 9.999999960041972e-13
_BCE = None


def _bce_value(x, t):
    """Pointwise ``-(t log x + (1 - t) log(1 - x))``, each log clamped at -100 (PyTorch's
    formula: ``log1p(-x)`` keeps ``log(1 - x)`` exact for small x)."""
    return (t - 1) * (-x).log1p().clamp(min=-100) - t * x.log().clamp(min=-100)


def _bce_function():
    """The autograd Function of the pointwise loss, built on first use (importing fiamma.nn
    stays free of fiamma.autograd until gradients are needed)."""
    global _BCE
    if _BCE is None:
        from fiamma.autograd import Function

        class _BinaryCrossEntropy(Function):
            """Gradients as PyTorch's: ``(x - t) / max(x (1 - x), 1e-12f)`` for the input (finite
            at x = 0 and 1, where the clamped logs' own derivative is 0 * inf = NaN); for the
            target the derivative of the clamped forward, ``max(log(1 - x), -100) -
            max(log x, -100)`` (PyTorch's ``-logit(x)`` is infinite at 0 and 1). The backward is
            made of differentiable ops, so higher-order gradients work."""

            @staticmethod
            def forward(ctx, x, t):
                ctx.save_for_backward(x, t)
                return _bce_value(x, t)

            @staticmethod
            def backward(ctx, grad):
                x, t = ctx.saved_tensors
                gx = gt = None
                if ctx.needs_input_grad[0]:
                    gx = grad * (x - t) / (x * (1 - x)).clamp(min=_BCE_EPS)
                if ctx.needs_input_grad[1]:
                    gt = grad * ((-x).log1p().clamp(min=-100) - x.log().clamp(min=-100))
                return gx, gt

        _BCE = _BinaryCrossEntropy
    return _BCE


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """``-w (t log x + (1 - t) log(1 - x))`` for probabilities x and targets t in [0, 1], each
    log clamped at -100 as in PyTorch; the input's gradient is PyTorch's
    ``w (x - t) / max(x (1 - x), 1e-12)``, finite where x is exactly 0 or 1.

    >>> x = fiamma.tensor([1.0, 0.5], requires_grad=True)
    >>> loss = binary_cross_entropy(x, fiamma.tensor([0.0, 1.0]))
    >>> round(loss.item(), 4)
    50.3466
    >>> loss.backward(); x.grad.tolist()
    [499999997952.0, -1.0]
    """
    op = "binary_cross_entropy"
    if not isinstance(input, fiamma.Tensor) or not isinstance(target, fiamma.Tensor):
        raise TypeError(f"{op}: input and target must be Tensors")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({fiamma.Size(target.shape)}) that is different "
                         f"to the input size ({fiamma.Size(input.shape)}) is deprecated. Please "
                         "ensure they have the same size.")
    if _fusable(input, target, weight):  # the range checks are in the kernel's pass
        return _fused.loss(op, input, target, weight, reduction=reduction)
    # written as "not inside" so that NaN is refused too, as PyTorch does
    if not bool(((input >= 0) & (input <= 1)).all()):
        raise RuntimeError(f"{op}: all elements of input should be between 0 and 1")
    if not bool(((target >= 0) & (target <= 1)).all()):
        raise RuntimeError(f"{op}: all elements of target should be between 0 and 1")
    if fiamma.is_grad_enabled() and (input.requires_grad or target.requires_grad):
        loss = _bce_function().apply(input, target)
    else:
        loss = _bce_value(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, op)


def _bce_logits(input, target, weight, pos_weight, reduction):
    softplus_neg = _softplus(-input)
    if pos_weight is not None:
        lw = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + lw * softplus_neg
    else:
        loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid and binary cross entropy in one stable formula:
    ``(1 - t) x + lw (log(1 + exp(-|x|)) + max(-x, 0))`` with ``lw = 1 + (pos_weight - 1) t``;
    one autograd node, ``BinaryCrossEntropyWithLogitsBackward0``."""
    op = "binary_cross_entropy_with_logits"
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({fiamma.Size(target.shape)}) must be the same as input "
                         f"size ({fiamma.Size(input.shape)})")
    if _fusable(input, target, weight, pos_weight):
        return _fused.loss(op, input, target, weight, pos_weight, reduction=reduction)
    _reduce_check(reduction, op)
    return as_node("BinaryCrossEntropyWithLogitsBackward0", _bce_logits,
                   (input, target, weight, pos_weight), reduction)


def kl_div(input, target, reduction="mean", log_target=False):
    """Kullback-Leibler divergence with ``input`` as log-probabilities: pointwise
    ``target (log target - input)`` (``log_target``: target given as log-probabilities).
    ``reduction='batchmean'`` divides the sum by the batch size (the mathematically right
    mean; ``'mean'`` averages over all elements, as PyTorch does)."""
    op = "kl_div"
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    if _fusable(input, target):  # (batchmean too: one node, where PyTorch's sum and division
        # are two)
        return _fused.loss(op, input, target, reduction=reduction,
                           param=float(bool(log_target)))
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = fiamma.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() else loss.sum()
    return _reduce(loss, reduction, op)


# ---- the second group of losses ------------------------------------------------------------


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated ``size_average``/``reduce`` pair, when given, decides."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    res = "none" if not reduce else "mean" if size_average else "sum"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{res}' instead.", UserWarning, stacklevel=3)
    return res


def _softplus(x):
    """``log(1 + exp(x))`` without overflow, with the gradient ``sigmoid(x)`` everywhere: the
    form ``max(x, 0) + log1p(exp(-|x|))`` has kinks in both terms and its autograd gradient at
    exactly 0 is 1, not 0.5 (a zero-initialised logit layer hits that on its first step)."""
    pos = x > 0
    return fiamma.where(pos, x, 0.0) + fiamma.where(pos, -x, x).exp().log1p()


def _grad_as_identity(x, y):
    """``y``'s value with the gradient of ``x`` (PyTorch clamps some inputs under no_grad)."""
    return x + (y - x).detach()


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Negative log likelihood of ``target ~ Poisson(rate)``: ``exp(input) - target * input``
    (``log_input``) or ``input - target * log(input + eps)``; ``full`` adds Stirling's
    approximation of ``log(target!)`` where ``target > 1``.

    >>> x = fiamma.tensor([0.5, 1.0]); t = fiamma.tensor([1.0, 3.0])
    >>> round(poisson_nll_loss(x, t).item(), 4)
    0.4335
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    op = "poisson_nll_loss"
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        t = target if isinstance(target, fiamma.Tensor) else fiamma.tensor(target)
        # the target itself where the term applies (its gradient flows, as in PyTorch), 1
        # elsewhere so that log never sees 0 (PyTorch's t log t there is NaN, then masked)
        safe = fiamma.where(t > 1, t, fiamma.ones_like(t))
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + stirling.masked_fill(t <= 1, 0.0)
    return _reduce(loss, reduction, op)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Gaussian negative log likelihood ``0.5 (log var + (input - target)^2 / var)`` (plus
    ``0.5 log(2 pi)`` with ``full``). ``var`` has the input's shape, or that shape with its
    last dimension dropped or one dimension 1 (shared variances), or is a float; it is
    clamped at ``eps`` for stability (the clamp passes gradients through, as PyTorch's does)."""
    op = "gaussian_nll_loss"
    if not isinstance(var, fiamma.Tensor):
        if var < 0:
            raise ValueError(f"{op}: var has negative entry/entries")
        var = fiamma.full_like(input, float(var))
    elif bool((var < 0).any()):
        raise ValueError(f"{op}: var has negative entry/entries")
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape != ishape:
        if ishape[:-1] == vshape:  # one variance per sample
            var = var.unsqueeze(-1)
        elif len(ishape) == len(vshape) and sum(
                v for i, v in zip(ishape, vshape) if i != v) == 1:
            pass  # one dimension of size 1 to broadcast, e.g. (N, 1, H, W) for (N, C, H, W)
        else:
            raise ValueError(f"{op}: var is of incorrect size: expected the input's shape "
                             f"{list(ishape)}, that shape without its last dimension, or one "
                             f"dimension of it as 1, got {list(vshape)}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction} is not valid")
    var = _grad_as_identity(var, var.detach().clamp(min=eps))
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, op)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``target == -1`` (cosine over the last dimension)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    op = "cosine_embedding_loss"
    if input1.dim() != input2.dim() or input1.dim() not in (1, 2):
        raise RuntimeError(f"{op}: expected 1-D or 2-D inputs of the same ndim, got "
                           f"{input1.dim()}-D and {input2.dim()}-D")
    if target.dim() != input1.dim() - 1:
        raise RuntimeError(f"{op}: {input1.dim()}D inputs expect a {input1.dim() - 1}D target, "
                           f"got {target.dim()}D")
    d = input1.dim() - 1
    eps = 1e-12
    prod = (input1 * input2).sum(d)
    mag1 = (input1 * input1).sum(d) + eps
    mag2 = (input2 * input2).sum(d) + eps
    cos = prod / (mag1 * mag2).sqrt()
    zeros = fiamma.zeros_like(cos)
    loss = (fiamma.where(target == 1, 1 - cos, zeros)
            + fiamma.where(target == -1, (cos - margin).clamp(min=0), zeros))
    return _reduce(loss, reduction, op)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    op = "margin_ranking_loss"
    if not input1.dim() == input2.dim() == target.dim():
        raise RuntimeError(f"{op}: all input tensors should have same dimension but got sizes: "
                           f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, "
                           f"target: {list(target.shape)}")
    loss = (-target * (input1 - input2) + margin).clamp(min=0)
    return _reduce(loss, reduction, op)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``input`` where ``target == 1``, ``max(0, margin - input)`` where ``target == -1``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    zeros = fiamma.zeros_like(input)
    loss = (fiamma.where(target != 1, (margin - input).clamp(min=0), zeros)
            + fiamma.where(target != -1, input, zeros))
    return _reduce(loss, reduction, "hinge_embedding_loss")


def _class_target(input, target, op):
    """(N, C) input with (N,) class targets, or (C,) (or 0-d: one class) with a
    0-d/1-element target."""
    if input.dim() not in (0, 1, 2):
        raise ValueError(f"{op}: expected 0-D, 1-D or 2-D input, got {input.dim()}-D "
                         f"{list(input.shape)}")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    y = target.reshape(-1).long()
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"{op}: inconsistent target size {list(target.shape)} for input of "
                         f"size {list(input.shape)}")
    c = x.shape[1]
    if y.numel() and bool(((y < 0) | (y >= c)).any()):
        raise IndexError(f"{op}: target out of range: expected 0 <= target < {c}, got "
                         f"{y[(y < 0) | (y >= c)][0].item()}")
    return x, y


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss: ``sum_{i != y} max(0, margin - x[y] + x[i])^p / C``, each
    term scaled by ``weight[y]``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    op = "multi_margin_loss"
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got {p}")
    x, y = _class_target(input, target, op)
    c = x.shape[1]
    if weight is not None and tuple(weight.shape) != (c,):
        raise ValueError(f"{op}: expected weight of shape [{c}], got {list(weight.shape)}")
    xy = x.gather(1, y.unsqueeze(1))
    z = fiamma.relu(margin - xy + x)  # at the hinge (0) no gradient (PyTorch's z > 0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[y].unsqueeze(1)
    not_y = fiamma.one_hot(y, c) == 0
    loss = (z * not_y).sum(1) / c
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction, op)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: ``target`` holds each sample's class indices, ended by the
    first -1; ``sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    op = "multilabel_margin_loss"
    if input.dim() > 2 or tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{op}: expected input and target of the same 0-D, 1-D or 2-D shape, "
                         f"got {list(input.shape)} and {list(target.shape)}")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    t = (target if target.dim() == 2 else target.reshape(1, -1)).long()
    c = x.shape[1]
    valid = (t >= 0).long().cumprod(1).bool()  # the labels before the first -1
    if bool((valid & (t >= c)).any()):
        raise IndexError(f"{op}: target out of range: expected -1 <= target < {c}")
    safe = fiamma.where(valid, t, fiamma.zeros_like(t))
    is_target = fiamma.zeros(x.shape, dtype=fiamma.float32, device=x.device).scatter_add(
        1, safe, valid.float()) > 0
    xj = x.gather(1, safe)
    z = fiamma.relu(1 - xj.unsqueeze(2) + x.unsqueeze(1))  # no gradient at the hinge
    mask = valid.unsqueeze(2) & (~is_target).unsqueeze(1)
    loss = (z * mask).sum((1, 2)) / c
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction, op)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per-class logistic loss averaged over the classes (last dimension)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    op = "multilabel_soft_margin_loss"
    loss = target * _softplus(-input) + (1 - target) * _softplus(input)
    if weight is not None:
        loss = loss * weight
    cd = input.dim() - 1
    loss = loss.sum(cd) / input.shape[cd]
    return _reduce(loss, reduction, op)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Two-class logistic loss ``log(1 + exp(-target * input))`` (computed without overflow);
    one autograd node, ``SoftMarginLossBackward0``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = _as_input_dtype(input, target)
    if _fusable(input, target):
        return _fused.loss("soft_margin_loss", input, target, reduction=reduction)
    return _reduce(_softplus(-target * input), reduction, "soft_margin_loss")


def _triplet_check(anchor, positive, negative, op):
    a, p, n = anchor.dim(), positive.dim(), negative.dim()
    if not a == p == n:
        raise RuntimeError(f"{op}: the anchor, positive, and negative tensors are expected to "
                           f"have the same number of dimensions, but got: anchor {a}D, "
                           f"positive {p}D, and negative {n}D inputs")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the p-norm pairwise distance
    (``swap``: ``d(a, n)`` replaced by ``min(d(a, n), d(p, n))``)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    op = "triplet_margin_loss"
    _triplet_check(anchor, positive, negative, op)
    from fiamma.nn._misc_functional import pairwise_distance
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = fiamma.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction, op)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """Triplet loss with any ``distance_function(x, y)`` (default: pairwise distance)."""
    op = "triplet_margin_with_distance_loss"
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    _triplet_check(anchor, positive, negative, op)
    if distance_function is None:
        from fiamma.nn._misc_functional import pairwise_distance as distance_function
    d_pos = distance_function(anchor, positive)
    d_neg = distance_function(anchor, negative)
    if swap:
        d_neg = fiamma.minimum(d_neg, distance_function(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction, op)


from fiamma.nn._ctc import ctc_loss  # noqa: E402

# PyTorch's autocast float32 list: inside an autocast region these compute in float32
_FLOAT32_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss",
                   "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                   "kl_div", "poisson_nll_loss", "cosine_embedding_loss", "margin_ranking_loss",
                   "hinge_embedding_loss", "multi_margin_loss", "multilabel_margin_loss",
                   "soft_margin_loss", "triplet_margin_loss", "ctc_loss")
# PyTorch's full signatures (after the leading tensors), with the deprecated size_average and
# reduce: old code passes them (``F.nll_loss(out, t, size_average=False)``) or passes later
# arguments by position in PyTorch's order
_TORCH_ORDER = {
    "nll_loss": (2, ("weight", "size_average", "ignore_index", "reduce", "reduction")),
    "cross_entropy": (2, ("weight", "size_average", "ignore_index", "reduce", "reduction",
                          "label_smoothing")),
    "mse_loss": (2, ("size_average", "reduce", "reduction", "weight")),
    "l1_loss": (2, ("size_average", "reduce", "reduction", "weight")),
    "binary_cross_entropy": (2, ("weight", "size_average", "reduce", "reduction")),
    "binary_cross_entropy_with_logits": (2, ("weight", "size_average", "reduce", "reduction",
                                             "pos_weight")),
    "kl_div": (2, ("size_average", "reduce", "reduction", "log_target")),
    "smooth_l1_loss": (2, ("size_average", "reduce", "reduction", "beta")),
    "poisson_nll_loss": (2, ("log_input", "full", "size_average", "eps", "reduce", "reduction")),
    "margin_ranking_loss": (3, ("margin", "size_average", "reduce", "reduction")),
    "hinge_embedding_loss": (2, ("margin", "size_average", "reduce", "reduction")),
    "multilabel_margin_loss": (2, ("size_average", "reduce", "reduction")),
    "soft_margin_loss": (2, ("size_average", "reduce", "reduction")),
    "multilabel_soft_margin_loss": (2, ("weight", "size_average", "reduce", "reduction")),
    "cosine_embedding_loss": (3, ("margin", "size_average", "reduce", "reduction")),
    "multi_margin_loss": (2, ("p", "margin", "weight", "size_average", "reduce", "reduction")),
    "triplet_margin_loss": (3, ("margin", "p", "eps", "swap", "size_average", "reduce",
                                "reduction")),
}


def _torch_signature(name, fn):
    """``fn`` called with PyTorch's signature for loss ``name``: later arguments by position in
    PyTorch's order, and ``size_average``/``reduce`` turned into ``reduction`` (with PyTorch's
    deprecation warning). Calls without them go straight through."""
    import functools
    import inspect

    lead, order = _TORCH_ORDER[name]
    accepted = set(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def loss(*args, **kwargs):
        if len(args) <= lead and "size_average" not in kwargs and "reduce" not in kwargs:
            return fn(*args, **kwargs)
        if len(args) > lead + len(order):
            raise TypeError(f"{name}() takes at most {lead + len(order)} positional arguments "
                            f"but {len(args)} were given")
        for k, v in zip(order, args[lead:]):
            if k in kwargs:
                raise TypeError(f"{name}() got multiple values for argument {k!r}")
            kwargs[k] = v
        size_average, reduce = kwargs.pop("size_average", None), kwargs.pop("reduce", None)
        kwargs["reduction"] = _legacy_reduction(size_average, reduce,
                                                kwargs.get("reduction", "mean"))
        for k in kwargs:
            if k not in accepted:
                raise TypeError(f"{name}: PyTorch's argument {k!r} is not supported by fiamma")
        return fn(*args[:lead], **kwargs)

    return loss


for _name in _TORCH_ORDER:
    globals()[_name] = _torch_signature(_name, globals()[_name])
for _name in _FLOAT32_LOSSES:
    globals()[_name] = fiamma.amp.float32_op(globals()[_name])
del _name
