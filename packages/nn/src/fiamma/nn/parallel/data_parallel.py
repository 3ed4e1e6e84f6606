"""DataParallel: PyTorch's single-process multi-device wrapper. fiamma runs one device per
process, so it wraps the module and calls it (as PyTorch's does with one device); the
``module.`` prefix of state_dict keys matches PyTorch's checkpoints."""

from fiamma.nn.modules.module import Module


class DataParallel(Module):
    """Wrap ``module``; ``forward`` calls it. State-dict keys gain the ``module.`` prefix.

    Several devices need one process each: use ``DistributedDataParallel``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> model = nn.DataParallel(nn.Linear(3, 2))
    >>> model(fiamma.ones(4, 3)).shape
    fiamma.Size([4, 2])
    >>> sorted(model.state_dict())
    ['module.bias', 'module.weight']
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an nn.Module, got "
                            f"{type(module).__name__}")
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError(
                f"DataParallel: device_ids={list(device_ids)}: fiamma runs one device per "
                "process; for several devices start one process per device and use "
                "DistributedDataParallel")
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
