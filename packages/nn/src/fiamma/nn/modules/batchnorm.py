"""BatchNorm1d, BatchNorm2d, BatchNorm3d and SyncBatchNorm (PyTorch's parameters, buffers,
state_dict keys, checks and repr)."""

import sys

import fiamma
from fiamma.nn import functional as F
from fiamma.nn.modules.module import Module
from fiamma.nn.modules.normalization import register_affine, reset_affine

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


class _NormBase(Module):
    """Shared state of batch and instance norm: ``weight`` and ``bias`` (affine; ``bias=False``
    drops the bias as in PyTorch 2.13), the buffers
    ``running_mean``, ``running_var`` and ``num_batches_tracked`` (track_running_stats)."""

    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        f = {"device": device, "dtype": dtype}
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        register_affine(self, num_features, affine, bias, f)
        if track_running_stats:
            self.register_buffer("running_mean", fiamma.zeros(num_features, **f))
            self.register_buffer("running_var", fiamma.ones(num_features, **f))
            self.register_buffer("num_batches_tracked",
                                 fiamma.tensor(0, dtype=fiamma.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        reset_affine(self)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args):
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = fiamma.tensor(0, dtype=fiamma.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) input over the batch (and length).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.BatchNorm1d(3)(fiamma.randn(4, 3)).shape
    fiamma.Size([4, 3])
    """

    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) input per channel."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) input per channel."""

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation whose training statistics are computed over the whole batch of every
    rank of a ``fiamma.distributed`` process group (input (N, C, ...) of at least 2 dims).

    In training mode, when a process group is initialised and has more than one rank, the
    per-channel mean and variance come from all ranks' inputs (one all_reduce forward, one
    backward) and the running statistics follow the global batch; otherwise (evaluation, a
    single process, a world of one) it is a plain batch norm. Unlike PyTorch, which synchronises
    only CUDA inputs, it works on the CPU too (MPI). Statistics are accumulated in float64.

    >>> import fiamma
    >>> from fiamma import nn
    >>> model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3)))
    >>> type(model[0]).__name__, model(fiamma.randn(2, 3, 4, 4)).shape
    ('SyncBatchNorm', fiamma.Size([2, 3, 4, 4]))
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _check_non_zero_input_channels(self, input):
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")

    def _sync_group(self):
        """(fiamma.distributed, group, world size) when the statistics must be synchronised."""
        dist = sys.modules.get("fiamma.distributed")  # no group can exist unless it is loaded
        if dist is None or not dist.is_initialized():
            return None
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        world = dist.get_world_size(group)
        return (dist, group, world) if world > 1 else None

    def forward(self, input):
        self._check_input_dim(input)
        self._check_non_zero_input_channels(input)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        sync = self._sync_group() if use_batch and self.training else None
        if sync is None:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        from fiamma.nn.modules._sync_batchnorm import SyncBatchNormFn

        dist, group, _ = sync
        keep = self.track_running_stats
        return SyncBatchNormFn.apply(input, self.weight, self.bias,
                                     self.running_mean if keep else None,
                                     self.running_var if keep else None,
                                     self.eps, factor, group, dist)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every BatchNorm1d/2d/3d replaced by a SyncBatchNorm holding the same
        parameters, buffers and mode (a BatchNorm given directly is returned converted)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = SyncBatchNorm(module.num_features, module.eps, module.momentum,
                                module.affine, module.track_running_stats, process_group)
            if module.affine:
                with fiamma.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return out
