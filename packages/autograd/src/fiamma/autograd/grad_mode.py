"""``torch.autograd.grad_mode``: the module path of the gradient-mode context managers
(``from torch.autograd.grad_mode import no_grad``); they are fiamma's own
:class:`fiamma.no_grad`, :class:`fiamma.enable_grad`, :class:`fiamma.set_grad_enabled` and
:class:`fiamma.inference_mode`.

>>> import fiamma
>>> from fiamma.autograd.grad_mode import no_grad
>>> with no_grad():
...     fiamma.is_grad_enabled()
False
"""

from fiamma.autograd_hook import enable_grad, inference_mode, no_grad, set_grad_enabled

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode"]
