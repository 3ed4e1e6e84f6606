"""The autograd node of SyncBatchNorm (loaded on the first synchronised forward, so that
``import fiamma.nn`` imports neither fiamma.autograd nor fiamma.distributed).

Forward: each rank sums x and x^2 per channel (in float64) and counts its elements; one
all_reduce of [sum, sum of squares, count] gives the global mean and biased variance. Backward:
each rank sums dy and dy * (x - mean) per channel; one all_reduce gives the global sums, and
the input gradient is PyTorch's: w * invstd * (dy - sum_dy / N - (x - mean) * invstd^2 *
sum_dy_xmu / N). The weight and bias gradients stay local (DistributedDataParallel averages
them, as in PyTorch)."""

import fiamma
from fiamma.autograd import Function


def _channel_view(t, ndim):
    return t.reshape((1, -1) + (1,) * (ndim - 2))


def _reduce_dims(ndim):
    return [0] + list(range(2, ndim))


class SyncBatchNormFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, group, dist):
        dims = _reduce_dims(x.dim())
        x64 = x.detach().to(fiamma.float64)
        count = x.numel() // max(x.shape[1], 1)
        stats = fiamma.cat([x64.sum(dims), (x64 * x64).sum(dims),
                            fiamma.tensor([float(count)], dtype=fiamma.float64)])
        dist.all_reduce(stats, group=group)
        c = x.shape[1]
        total = float(stats[2 * c].item())
        if total <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel across "
                             f"the ranks when training, got input size {list(x.shape)} "
                             f"({int(total)} values per channel in all)")
        mean = stats[:c] / total
        var = (stats[c:2 * c] / total - mean * mean).clamp_(min=0.0)
        invstd = 1.0 / (var + eps).sqrt()
        if running_mean is not None:
            with fiamma.no_grad():
                running_mean.mul_(1.0 - momentum).add_(mean.to(running_mean.dtype),
                                                       alpha=momentum)
                unbiased = var * (total / (total - 1.0))
                running_var.mul_(1.0 - momentum).add_(unbiased.to(running_var.dtype),
                                                      alpha=momentum)
        nd = x.dim()
        m, s = _channel_view(mean, nd), _channel_view(invstd, nd)
        y = (x64 - m) * s
        if weight is not None:
            y = y * _channel_view(weight.detach().to(fiamma.float64), nd)
        if bias is not None:
            y = y + _channel_view(bias.detach().to(fiamma.float64), nd)
        ctx.save_for_backward(x, weight)
        ctx.mean, ctx.invstd, ctx.total = mean, invstd, total
        ctx.group, ctx.dist, ctx.has_bias = group, dist, bias is not None
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        nd = x.dim()
        dims = _reduce_dims(nd)
        mean, invstd, total = ctx.mean, ctx.invstd, ctx.total
        dy64 = dy.to(fiamma.float64)
        xmu = x.detach().to(fiamma.float64) - _channel_view(mean, nd)
        local = fiamma.cat([dy64.sum(dims), (dy64 * xmu).sum(dims)])
        c = x.shape[1]
        grad_weight = (local[c:] * invstd).to(weight.dtype) if weight is not None and \
            ctx.needs_input_grad[1] else None
        grad_bias = local[:c].to(weight.dtype if weight is not None else x.dtype) \
            if ctx.has_bias and ctx.needs_input_grad[2] else None
        grad_x = None
        if ctx.needs_input_grad[0]:
            both = local.clone()
            ctx.dist.all_reduce(both, group=ctx.group)
            mean_dy = _channel_view(both[:c] / total, nd)
            mean_dy_xmu = _channel_view(both[c:] / total, nd)
            s = _channel_view(invstd, nd)
            g = (dy64 - mean_dy - xmu * (s * s) * mean_dy_xmu) * s
            if weight is not None:
                g = g * _channel_view(weight.detach().to(fiamma.float64), nd)
            grad_x = g.to(x.dtype)
        return grad_x, grad_weight, grad_bias, None, None, None, None, None, None
