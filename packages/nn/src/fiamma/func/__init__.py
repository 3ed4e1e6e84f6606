"""fiamma.func: composable function transforms (PyTorch's ``torch.func``).

``vmap`` maps a function over a batch dimension; ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``linearize``, ``jacrev``, ``jacfwd`` and ``hessian`` differentiate functions;
``functional_call`` and ``stack_module_state`` run ``nn.Module``s with tensors passed in.
They compose: per-sample gradients are ``vmap(grad(loss), in_dims=(None, 0, 0))``, an
ensemble is ``vmap(lambda p, b, x: functional_call(model, (p, b), (x,)))`` over
``stack_module_state(models)``, a Hessian is ``jacfwd(jacrev(f))``.

How fiamma computes them (exact results; the costs differ from PyTorch's):

- ``vmap`` calls the function once on the whole batch when its ops have batching rules
  (elementwise ops, reductions, views, matrix products, linear/conv/pooling, losses, and the
  transforms below nested inside), else once per element on views of the inputs, stacking the
  results (exact; data-dependent control flow, ``.item()``, in-place ops and random draws
  take that path).
- The derivative transforms run the function once and differentiate it with
  ``fiamma.autograd.grad``; Jacobians take one backward pass per output element (``jacrev``)
  or per input element (``jacfwd``) when the function has an op without a batching rule,
  else one pass over all of them with the function rerun on a batch of copies.
- Forward mode (``jvp``, ``jacfwd``, ``linearize``) uses the exact double-vjp identity:
  fiamma has no per-op forward-mode formulas (``fiamma.autograd.forward_ad`` uses the same
  identity), so a jvp costs about two backward passes.

>>> import fiamma
>>> from fiamma.func import vmap, grad
>>> loss = lambda w, x: (w * x).sum() ** 2
>>> w, xs = fiamma.tensor([1., 2.]), fiamma.tensor([[1., 0.], [0., 1.]])
>>> vmap(grad(loss), in_dims=(None, 0))(w, xs).tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""

import functools

from ._autodiff import grad, grad_and_value, jvp, linearize, vjp
from ._jacobian import hessian, jacfwd, jacrev
from ._module import functional_call, replace_all_batch_norm_modules_, stack_module_state
from ._rearrange import rearrange
from ._vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd",
           "hessian", "functional_call", "stack_module_state", "replace_all_batch_norm_modules_",
           "functionalize", "debug_unwrap", "rearrange"]

_REMOVE = ("mutations", "mutations_and_views")


def functionalize(func, *, remove="mutations"):
    """``func`` as a function without observable mutation of intermediates (PyTorch's
    ``torch.func.functionalize``). fiamma runs eagerly and has no graph to rewrite, so the
    returned function computes exactly what ``func`` computes (mutations of the inputs
    included, as PyTorch's functionalized program also applies them).

    >>> import fiamma
    >>> from fiamma.func import functionalize
    >>> functionalize(lambda x: x.add_(1))(fiamma.zeros(2)).tolist()
    [1.0, 1.0]
    """
    if remove not in _REMOVE:
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for "
                           f"remove={remove}. Valid options are: 'mutations' and "
                           "'mutations_and_views'")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def debug_unwrap(tensor, *, recurse=True):
    """The plain tensor inside a transform's wrapper: fiamma's transforms do not wrap
    tensors, so this is ``tensor`` itself.

    >>> import fiamma
    >>> from fiamma.func import debug_unwrap
    >>> x = fiamma.ones(2)
    >>> debug_unwrap(x) is x
    True
    """
    return tensor
