"""``torch.__future__``: switches for behaviour that will become the default.

``set_swap_module_params_on_conversion(True)``: ``nn.Module.to()``/``float()``/... and
``load_state_dict`` swap each parameter's contents with ``fiamma.utils.swap_tensors`` (the
Parameter object keeps its identity; a ``__torch_dispatch__`` subclass's payload is converted
too) instead of setting ``.data``; ``load_state_dict`` goes through ``Tensor.module_load``.
``set_overwrite_module_params_on_conversion(True)``: conversions put new Parameter objects in
the module instead.

>>> import fiamma
>>> fiamma.__future__.get_swap_module_params_on_conversion()
False
"""

__all__ = ["set_swap_module_params_on_conversion", "get_swap_module_params_on_conversion",
           "set_overwrite_module_params_on_conversion",
           "get_overwrite_module_params_on_conversion"]

_swap = False
_overwrite = False


def set_swap_module_params_on_conversion(value):
    """Whether module conversions and ``load_state_dict`` swap parameters in place."""
    global _swap
    _swap = bool(value)


def get_swap_module_params_on_conversion():
    return _swap


def set_overwrite_module_params_on_conversion(value):
    """Whether module conversions assign new Parameter objects (instead of setting ``.data``)."""
    global _overwrite
    _overwrite = bool(value)


def get_overwrite_module_params_on_conversion():
    return _overwrite
