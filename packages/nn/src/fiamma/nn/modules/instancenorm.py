"""InstanceNorm1d, InstanceNorm2d, InstanceNorm3d (affine=False and track_running_stats=False
by default, as in PyTorch; unbatched input accepted)."""

import warnings

from fiamma.nn import functional as F
from fiamma.nn.modules.batchnorm import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    _no_batch_dim = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args):
        # checkpoints older than PyTorch 0.4 (no version) hold running stats an instance norm
        # that does not track them must drop, as PyTorch does
        if local_metadata.get("version", None) is None and not self.track_running_stats:
            dropped = [prefix + n for n in ("running_mean", "running_var")
                       if prefix + n in state_dict]
            if dropped:
                error_msgs.append(
                    "Unexpected running stats buffer(s) {names} for {klass} with "
                    "track_running_stats=False. If state_dict is a checkpoint saved before 0.4.0, "
                    "this may be expected because {klass} does not track running stats by "
                    "default since 0.4.0. Please remove these keys from state_dict. If the "
                    "running stats are actually needed, instead set track_running_stats=True in "
                    "{klass} to enable them. See the documentation of {klass} for details."
                    .format(names=" and ".join(f'"{k}"' for k in dropped),
                            klass=type(self).__name__))
                for k in dropped:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args)

    def _check_input_dim(self, input):
        d = self._no_batch_dim
        if input.dim() not in (d, d + 1):
            raise ValueError(f"expected {d}D or {d + 1}D input (got {input.dim()}D input)")

    def _apply_instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        fdim = input.dim() - self._no_batch_dim
        if input.shape[fdim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={fdim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[fdim]}.")
            warnings.warn(f"input's size at dim={fdim} does not match num_features. You can "
                          "silence this warning by not passing in num_features, which is not "
                          "used because affine=False")
        if input.dim() == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or unbatched (C, L) input.

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.InstanceNorm1d(3)(fiamma.randn(2, 3, 5)).shape
    fiamma.Size([2, 3, 5])
    """
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or unbatched (C, H, W) input."""
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of (N, C, D, H, W) or unbatched (C, D, H, W) input."""
    _no_batch_dim = 4
