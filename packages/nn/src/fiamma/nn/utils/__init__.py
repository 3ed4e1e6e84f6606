"""``fiamma.nn.utils``: gradient clipping, parameter/vector conversion, and ``rnn`` (packed
and padded sequences)."""

from fiamma.nn.utils import rnn  # noqa: F401
from fiamma.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from fiamma.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters"]
