"""Stochastic depth (Huang et al., 2016): drop whole residual branches at random while
training, scaling the survivors by ``1 / (1 - p)`` so the expectation is unchanged."""
import fiamma
from fiamma import nn

__all__ = ["stochastic_depth", "StochasticDepth"]


def stochastic_depth(input, p, mode, training=True):
    """Zero each sample's tensor (``mode="row"``) or the whole batch (``mode="batch"``) with
    probability ``p``; survivors are divided by ``1 - p``. Identity when not ``training`` or
    ``p == 0``. Uses fiamma's global generator (reproducible under ``fiamma.manual_seed``).

        >>> x = fiamma.ones(4, 3)
        >>> y = stochastic_depth(x, 0.5, "row")   # each row is all 0 or all 2
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"stochastic_depth: drop probability has to be between 0 and 1, "
                         f"but got {p}")
    if mode not in ("batch", "row"):
        raise ValueError(f"stochastic_depth: mode has to be either 'batch' or 'row', "
                         f"but got {mode}")
    if not training or p == 0.0:
        return input
    survival = 1.0 - p
    if mode == "row":
        size = [input.shape[0]] + [1] * (input.ndim - 1)
    else:
        size = [1] * input.ndim
    noise = fiamma.bernoulli(fiamma.full(size, survival, dtype=input.dtype))
    if survival > 0.0:
        noise = noise / survival
    return input * noise


class StochasticDepth(nn.Module):
    """Module form of :func:`stochastic_depth` (active in training mode only)."""

    def __init__(self, p, mode):
        super().__init__()
        self.p = p
        self.mode = mode

    def forward(self, input):
        return stochastic_depth(input, self.p, self.mode, self.training)

    def __repr__(self):
        return f"{self.__class__.__name__}(p={self.p}, mode={self.mode})"
