"""Numerical gradient checks: analytical Jacobians (from backward) against central finite
differences, in float64.

>>> import fiamma
>>> from fiamma.autograd import gradcheck
>>> x = fiamma.rand(3, dtype=fiamma.float64, requires_grad=True)
>>> gradcheck(lambda t: (t * t).sum(), (x,))
True
"""

import itertools

import fiamma
from fiamma import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "get_numerical_jacobian",
           "get_analytical_jacobian", "get_forward_jacobian"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck when a Jacobian does not match."""


def _tuple(x):
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _outputs(fn, inputs):
    out = fn(*inputs)
    return _tuple(out)


def _flat(t):
    """A float64 host copy of ``t``, flattened (Jacobians are assembled on the CPU)."""
    return t.detach().to("cpu", fiamma.float64).reshape(-1).clone()


def _zeros(n, m):
    return fiamma.zeros((n, m), dtype=fiamma.float64)


def get_numerical_jacobian(fn, inputs, eps=1e-6):
    """``[input][output]`` Jacobians (ndarray of shape (in.numel(), out.numel())) by central
    differences, perturbing each element of each differentiable input in place."""
    inputs = _tuple(inputs)
    outs = _outputs(fn, inputs)
    jac = []
    for x in inputs:
        if not (isinstance(x, Tensor) and x.requires_grad):
            jac.append(None)
            continue
        data = x.detach()  # shares x's memory: writes go into x
        blocks = [_zeros(x.numel(), o.numel()) for o in outs]
        for k, idx in enumerate(itertools.product(*(range(s) for s in x.shape))):
            orig = data[idx].item()
            # func runs with grad mode as the caller has it (gradgradcheck's func needs it)
            data[idx] = orig - eps
            lo = [_flat(o) for o in _outputs(fn, inputs)]
            data[idx] = orig + eps
            hi = [_flat(o) for o in _outputs(fn, inputs)]
            data[idx] = orig
            for j in range(len(outs)):
                blocks[j][k] = (hi[j] - lo[j]) / (2 * eps)
        jac.append(blocks)
    return jac


def get_analytical_jacobian(fn, inputs, create_graph=False):
    """``[input][output]`` Jacobians from backward, one vector-Jacobian product per output
    element."""
    inputs = _tuple(inputs)
    diff = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    outs = _outputs(fn, inputs)
    blocks = {id(x): [_zeros(x.numel(), o.numel()) for o in outs] for x in diff}
    for j, o in enumerate(outs):
        if not (isinstance(o, Tensor) and o.requires_grad):
            continue
        n = o.numel()
        for k in range(n):
            g = fiamma.zeros(n, dtype=o.dtype, device=o.device)
            g[k] = 1.0
            go = g.reshape(tuple(o.shape))
            res = fiamma.autograd.grad(o, diff, go, retain_graph=True, allow_unused=True,
                                       create_graph=create_graph)
            for x, r in zip(diff, res):
                if r is not None:
                    if tuple(r.shape) != tuple(x.shape):
                        raise GradcheckError(
                            f"gradient for an input of shape {tuple(x.shape)} has shape "
                            f"{tuple(r.shape)}")
                    blocks[id(x)][j][:, k] = _flat(r)
    return [blocks.get(id(x)) if isinstance(x, Tensor) and x.requires_grad else None
            for x in inputs]


def get_forward_jacobian(fn, inputs):
    """``[input][output]`` Jacobians from forward-mode AD (``fiamma.autograd.forward_ad``), one
    Jacobian-vector product per element of each input that requires grad: row ``k`` is the
    tangent of the outputs for the unit tangent at element ``k``."""
    from fiamma.autograd import forward_ad as fwAD

    inputs = _tuple(inputs)
    outs = _outputs(fn, inputs)
    jac = []
    for i, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad):
            jac.append(None)
            continue
        blocks = [_zeros(x.numel(), o.numel()) for o in outs]
        for k in range(x.numel()):
            t = fiamma.zeros(x.numel(), dtype=x.dtype, device=x.device)
            t[k] = 1.0
            with fwAD.dual_level():
                args = list(inputs)
                args[i] = fwAD.make_dual(x, t.reshape(tuple(x.shape)))
                res = _outputs(fn, args)
                for j, o in enumerate(res):
                    if not isinstance(o, Tensor):
                        continue
                    tan = fwAD.unpack_dual(o).tangent
                    if tan is not None:
                        if tuple(tan.shape) != tuple(o.shape):
                            raise GradcheckError(
                                f"forward gradient for output {j} of shape {tuple(o.shape)} "
                                f"has shape {tuple(tan.shape)}")
                        blocks[j][k] = _flat(tan)
        jac.append(blocks)
    return jac


def _compare(numerical, analytical, rtol, atol, mode):
    for i, (num, ana) in enumerate(zip(numerical, analytical)):
        if num is None:
            continue
        for j, (n, a) in enumerate(zip(num, ana)):
            if not fiamma.allclose(a, n, rtol=rtol, atol=atol):
                raise GradcheckError(
                    f"Jacobian mismatch for output {j} with respect to input {i}{mode},\n"
                    f"numerical:{n}\nanalytical:{a}\n")


def _realified(func, inputs):
    """``(func', inputs')`` for the real function that ``func`` is on pairs: each complex
    input that requires grad becomes a float leaf of shape (..., 2) (its real and imaginary
    parts) and each complex output its ``view_as_real``. Its Jacobian is the real Jacobian of
    func over the parts, which backward reproduces exactly when the complex gradients follow
    PyTorch's convention (grad = dL/dRe + i dL/dIm, i.e. the conjugate Wirtinger derivative
    doubled); finite differences perturb the real and imaginary parts one at a time."""
    flags = [isinstance(x, Tensor) and x.requires_grad and x.dtype.is_complex for x in inputs]
    if not any(flags) and not any(isinstance(o, Tensor) and o.dtype.is_complex
                                  for o in _outputs(func, inputs)):
        return func, inputs
    new = tuple(fiamma.view_as_real(x.detach()).clone().requires_grad_(True) if f else x
                for x, f in zip(inputs, flags))

    def real_func(*args):
        ins = tuple(fiamma.view_as_complex(a) if f else a for a, f in zip(args, flags))
        return tuple(fiamma.view_as_real(o) if isinstance(o, Tensor) and o.dtype.is_complex
                     else o for o in _outputs(func, ins))

    return real_func, new


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check the gradients of ``func(*inputs)`` w.r.t. the inputs that require grad against
    finite differences. Inputs should be float64 or complex128 (complex inputs and outputs are
    checked through their real and imaginary parts). Returns True, or raises GradcheckError (or
    returns False with ``raise_exception=False``).

    ``check_backward_ad`` checks the Jacobian from reverse mode (backward), ``check_forward_ad``
    the one from forward mode (``fiamma.autograd.forward_ad``: one Jacobian-vector product per
    input element); at least one must be True. ``check_undefined_grad``,
    ``check_batched_grad``, ``check_batched_forward_grad``, ``check_grad_dtypes``,
    ``nondet_tol``, ``fast_mode`` and ``masked`` are accepted; fiamma always runs the full
    (slow-mode) check and none of those extra checks.

    >>> import fiamma
    >>> from fiamma.autograd import gradcheck
    >>> z = fiamma.randn(3, dtype=fiamma.complex128, requires_grad=True)
    >>> gradcheck(lambda t: (t * t.conj()).exp(), (z,))
    True
    """
    if not (check_forward_ad or check_backward_ad):
        raise ValueError("gradcheck: expected at least one of check_forward_ad or "
                         "check_backward_ad to be True")
    inputs = _tuple(inputs)
    for x in inputs:
        if isinstance(x, Tensor) and x.requires_grad and \
                x.dtype not in (fiamma.float64, fiamma.complex128):
            import warnings

            warnings.warn(f"gradcheck: input of dtype {x.dtype} is not float64; the check may "
                          "fail from rounding", stacklevel=2)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and any(
                st == 0 and n > 1 for n, st in zip(x.shape, x.stride())):
            raise RuntimeError(
                f"The {i}th input has a dimension with stride 0. gradcheck only supports inputs "
                "that are non-overlapping to be able to compute the numerical gradients "
                "correctly. You should call .contiguous on the input before passing it to "
                "gradcheck.")
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of the them have requires_grad=True.")
    func, inputs = _realified(func, inputs)
    try:
        numerical = get_numerical_jacobian(func, inputs, eps)
        if check_backward_ad:
            _compare(numerical, get_analytical_jacobian(func, inputs), rtol, atol, "")
        if check_forward_ad:
            _compare(numerical, get_forward_jacobian(func, inputs), rtol, atol,
                     " (forward AD)")
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second derivatives: gradcheck of the function ``(inputs, grad_outputs) ->
    grad(func(inputs), inputs, grad_outputs, create_graph=True)`` (complex inputs, outputs and
    grad_outputs are checked through their parts, as in gradcheck)."""
    inputs = _tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        gen = fiamma.Generator().manual_seed(0)
        grad_outputs = tuple(
            fiamma.randn(tuple(o.shape), generator=gen, dtype=o.dtype).to(o.device)
            .requires_grad_(True)
            for o in outs)
    grad_outputs = _tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def vjp(*args):
        ins, gos = args[:n_in], args[n_in:]
        out = _outputs(func, ins)
        pairs = [(o, g) for o, g in zip(out, gos) if isinstance(o, Tensor) and o.requires_grad]
        res = fiamma.autograd.grad([o for o, _ in pairs], [ins[i] for i in diff_idx],
                                   [g for _, g in pairs], create_graph=True, allow_unused=True)
        return tuple(r if r is not None else fiamma.zeros_like(ins[i])
                     for r, i in zip(res, diff_idx))

    return gradcheck(vjp, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev)
