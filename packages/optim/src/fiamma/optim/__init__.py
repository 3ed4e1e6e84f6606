"""fiamma.optim: optimizers and learning-rate schedulers with PyTorch's torch.optim API.

>>> import fiamma
>>> from fiamma import optim
>>> w = fiamma.tensor([1.0, -1.0])
>>> opt = optim.Adam([w], lr=0.1)
>>> w.grad = fiamma.tensor([0.5, -0.5]); opt.step()
>>> [round(v, 3) for v in w.tolist()]
[0.9, -0.9]
"""

from fiamma.optim import lr_scheduler, swa_utils
from fiamma.optim._version import __version__
from fiamma.optim.adam import Adam, Adamax, AdamW, NAdam, RAdam, SparseAdam
from fiamma.optim.adaptive import Adadelta, Adagrad, RMSprop
from fiamma.optim.classic import ASGD, Rprop
from fiamma.optim.factored import Adafactor, Muon
from fiamma.optim.lbfgs import LBFGS
from fiamma.optim.optimizer import (
    Optimizer,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
    swap_in_optimizer_params_and_state,
)
from fiamma.optim.sgd import SGD

__all__ = [
    "Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad",
    "Adadelta", "ASGD", "Rprop", "LBFGS", "SparseAdam", "Adafactor", "Muon", "lr_scheduler",
    "swa_utils", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook",
    "swap_in_optimizer_params_and_state", "__version__",
]
