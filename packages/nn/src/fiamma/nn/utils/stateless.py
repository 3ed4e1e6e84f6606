"""``torch.nn.utils.stateless``: the older home of ``functional_call`` (now
``fiamma.func.functional_call``, which this calls).

>>> import fiamma
>>> m = fiamma.nn.Linear(2, 1)
>>> w = {"weight": fiamma.ones(1, 2), "bias": fiamma.zeros(1)}
>>> functional_call(m, w, (fiamma.tensor([[1.0, 2.0]]),)).tolist()
[[3.0]]
"""

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module`` with ``parameters_and_buffers`` (a name -> tensor dict) standing in for
    its own parameters and buffers for this call (PyTorch's deprecated
    ``torch.nn.utils.stateless.functional_call``; see ``fiamma.func.functional_call``)."""
    from fiamma.func import functional_call as call

    return call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                strict=strict)
