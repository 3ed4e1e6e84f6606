"""A custom differentiable op with ``fiamma.autograd.Function``: Swish with a learnable beta.

    python examples/custom_function.py
    python examples/custom_function.py --steps 50

``swish(x, beta) = x * sigmoid(beta * x)`` (beta is a tensor broadcast against x, e.g. one
value per channel). ``forward`` computes it without recording a graph and saves what backward
needs with ``ctx.save_for_backward``; ``backward`` returns one gradient per input of forward
(None for the non-tensor ones), and reduces beta's gradient back to beta's shape, since
broadcasting in forward means summing in backward:

    d/dx    = s + beta * x * s * (1 - s)        with s = sigmoid(beta * x)
    d/dbeta = x * x * s * (1 - s)

Because backward is written with differentiable fiamma ops, second derivatives work too:
``gradcheck`` compares the gradients with finite differences (in float64) and ``gradgradcheck``
does the same for the gradient of the gradient. A few Adam steps then learn beta.
"""

import argparse

import fiamma
from fiamma.autograd import Function, gradcheck, gradgradcheck


def sum_to_shape(grad, shape):
    """Sum ``grad`` over the dimensions that broadcasting added or expanded to reach ``shape``."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(dims, keepdim=True) if dims else grad


class Swish(Function):
    """x * sigmoid(beta * x), differentiable in x and in beta."""

    @staticmethod
    def forward(ctx, x, beta, clamp=None):
        # save inputs, not intermediates: backward recomputes sigmoid(beta * x) from them so
        # that the graph it records reaches x and beta (needed for second derivatives)
        ctx.save_for_backward(x, beta)
        ctx.clamp = clamp               # non-tensor state goes on ctx as plain attributes
        out = x * fiamma.sigmoid(beta * x)
        return out if clamp is None else out.clamp(max=clamp)

    @staticmethod
    def backward(ctx, grad_out):
        x, beta = ctx.saved_tensors
        s = fiamma.sigmoid(beta * x)
        if ctx.clamp is not None:       # clamped positions pass no gradient
            grad_out = grad_out * (x * s <= ctx.clamp)
        ds = s * (1 - s)
        grad_x = grad_beta = None
        if ctx.needs_input_grad[0]:
            grad_x = sum_to_shape(grad_out * (s + beta * x * ds), x.shape)
        if ctx.needs_input_grad[1]:
            grad_beta = sum_to_shape(grad_out * x * x * ds, beta.shape)
        return grad_x, grad_beta, None  # one per forward input; None for `clamp`


def swish(x, beta, clamp=None):
    """Swish with a learnable ``beta`` (any shape broadcastable to ``x``).

    >>> x = fiamma.randn(4, 3, requires_grad=True)
    >>> beta = fiamma.ones(1, 3, requires_grad=True)
    >>> swish(x, beta).sum().backward()
    >>> beta.grad.shape
    fiamma.Size([1, 3])
    """
    return Swish.apply(x, beta, clamp)


def check_gradients():
    """gradcheck and gradgradcheck in float64, plus agreement with the composed ops."""
    gen = fiamma.Generator().manual_seed(0)
    x = fiamma.randn(5, 3, dtype=fiamma.float64, generator=gen, requires_grad=True)
    beta = fiamma.randn(1, 3, dtype=fiamma.float64, generator=gen).add_(1.0).requires_grad_()
    assert gradcheck(swish, (x, beta))
    assert gradgradcheck(swish, (x, beta))
    assert gradcheck(lambda x, b: swish(x, b, clamp=0.5), (x, beta))
    print("gradcheck and gradgradcheck pass (float64, beta broadcast over rows)")

    # the same result and gradients as letting autograd differentiate the composed ops
    gx, gb = fiamma.autograd.grad(swish(x, beta).sum(), (x, beta))
    rx, rb = fiamma.autograd.grad((x * fiamma.sigmoid(beta * x)).sum(), (x, beta))
    assert fiamma.allclose(gx, rx) and fiamma.allclose(gb, rb)
    print("matches autograd through x * sigmoid(beta * x)")


def fit_beta(steps=200, lr=0.1):
    """Recover beta = 2.5 from samples of swish(x, 2.5); return the learned beta."""
    gen = fiamma.Generator().manual_seed(1)
    x = fiamma.randn(256, 1, generator=gen) * 3
    target = x * fiamma.sigmoid(2.5 * x)
    beta = fiamma.ones(1, requires_grad=True)
    opt = fiamma.optim.Adam([beta], lr=lr)
    for step in range(1, steps + 1):
        loss = ((swish(x, beta) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % max(1, steps // 5) == 0 or step == 1:
            print(f"step {step:4d}  loss {loss.item():.5f}  beta {beta.item():.4f}")
    return beta.item()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="SGD steps that fit beta")
    args = p.parse_args(argv)
    check_gradients()
    beta = fit_beta(args.steps)
    print(f"learned beta {beta:.4f} (true 2.5)")
    return beta


if __name__ == "__main__":
    main()
