"""Loss functions (``torch.nn.functional`` losses), composed of differentiable core ops, so
their gradients (and higher-order gradients) come from autograd's formulas."""

import warnings

import fiamma

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "cross_entropy",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]


def _reduce(loss, reduction, op):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: {reduction} is not a valid value for reduction")


def _pointwise_pair(input, target, op):
    if not isinstance(input, fiamma.Tensor) or not isinstance(target, fiamma.Tensor):
        raise TypeError(f"{op}: input and target must be Tensors")
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({fiamma.Size(target.shape)}) that is different to "
                      f"the input size ({fiamma.Size(input.shape)}). This will likely lead to "
                      "incorrect results due to broadcasting. Please ensure they have the same "
                      "size.", UserWarning, stacklevel=3)
    return input - target


def mse_loss(input, target, reduction="mean"):
    """Mean squared error ``(input - target)^2``."""
    d = _pointwise_pair(input, target, "mse_loss")
    return _reduce(d * d, reduction, "mse_loss")


def l1_loss(input, target, reduction="mean"):
    """Mean absolute error."""
    return _reduce(_pointwise_pair(input, target, "l1_loss").abs(), reduction, "l1_loss")


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (beta 0: L1)."""
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    a = _pointwise_pair(input, target, "smooth_l1_loss").abs()
    if beta == 0:
        return _reduce(a, reduction, "smooth_l1_loss")
    loss = fiamma.where(a < beta, 0.5 * a * a / beta, a - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0):
    """``0.5 d^2`` where ``|d| <= delta``, else ``delta (|d| - 0.5 delta)``."""
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
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
    equal to ``ignore_index`` contribute nothing (and do not count in the mean)."""
    op = "nll_loss"
    if target.dtype.is_floating_point or target.dtype is fiamma.bool:
        raise RuntimeError(f"{op}: expected target of an integer dtype (class indices), got "
                           f"{target.dtype}")
    class_dim = _class_dim_input(input, target, op)
    n_classes = input.shape[class_dim]
    if weight is not None and tuple(weight.shape) != (n_classes,):
        raise RuntimeError(f"{op}: weight tensor should be defined either for all "
                           f"{n_classes} classes or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
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
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target if w_ is None else logp * target * w_
        loss = -prod.sum(class_dim)
        if reduction == "mean":
            count = input.numel() // n_classes if n_classes else 0
            return loss.sum() / count if count else loss.sum() * float("nan")
        return _reduce(loss, reduction, op)
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
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


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """``-w (t log x + (1 - t) log(1 - x))`` for probabilities x (logs clamped at -100)."""
    op = "binary_cross_entropy"
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({fiamma.Size(target.shape)}) that is different "
                         f"to the input size ({fiamma.Size(input.shape)}) is deprecated. Please "
                         "ensure they have the same size.")
    if bool(((input < 0) | (input > 1)).any()):
        raise RuntimeError(f"{op}: all elements of input should be between 0 and 1")
    log_x = input.log().clamp(min=-100)
    log_1mx = (1 - input).log().clamp(min=-100)
    loss = -(target * log_x + (1 - target) * log_1mx)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, op)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid and binary cross entropy in one stable formula:
    ``(1 - t) x + lw (log(1 + exp(-|x|)) + max(-x, 0))`` with ``lw = 1 + (pos_weight - 1) t``."""
    op = "binary_cross_entropy_with_logits"
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({fiamma.Size(target.shape)}) must be the same as input "
                         f"size ({fiamma.Size(input.shape)})")
    softplus_neg = (-input.abs()).exp().log1p() + (-input).clamp(min=0)
    if pos_weight is not None:
        lw = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + lw * softplus_neg
    else:
        loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, op)


def kl_div(input, target, reduction="mean", log_target=False):
    """Kullback-Leibler divergence with ``input`` as log-probabilities: pointwise
    ``target (log target - input)`` (``log_target``: target given as log-probabilities).
    ``reduction='batchmean'`` divides the sum by the batch size (the mathematically right
    mean; ``'mean'`` averages over all elements, as PyTorch does)."""
    op = "kl_div"
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = fiamma.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() else loss.sum()
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    return _reduce(loss, reduction, op)
