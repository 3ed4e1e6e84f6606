"""``fiamma.nn.utils``: gradient clipping, parameter/vector conversion, parametrizations,
the hook-based weight / spectral normalisation, ``prune``, conv/linear + batch-norm fusion,
and ``rnn`` (packed and padded sequences)."""
from fiamma.nn.utils import parametrizations, parametrize, prune, rnn, stateless  # noqa: F401
from fiamma.nn.utils.clip_grad import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from fiamma.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from fiamma.nn.utils.fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from fiamma.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from fiamma.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector",
           "vector_to_parameters", "parametrize", "prune", "parametrizations", "weight_norm",
           "remove_weight_norm", "spectral_norm", "remove_spectral_norm", "rnn",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "stateless"]
