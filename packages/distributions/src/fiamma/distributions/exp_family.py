"""``ExponentialFamily``: densities p(x; theta) = exp(<t(x), theta> - F(theta) + k(x)).

Subclasses give ``_natural_params`` and ``_log_normalizer`` (F); the entropy and the KL
divergence between two members of one family then follow from the Bregman divergence of F,
computed with autograd (as PyTorch does).

>>> import fiamma
>>> from fiamma.distributions import Poisson
>>> from fiamma.distributions.exp_family import ExponentialFamily
>>> isinstance(Poisson(fiamma.tensor(2.0)), ExponentialFamily)
True
"""

import fiamma
from fiamma.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of exponential-family distributions."""

    @property
    def _natural_params(self):
        raise NotImplementedError(f"{type(self).__name__} does not define _natural_params")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} does not define _log_normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"{type(self).__name__} does not define "
                                  "_mean_carrier_measure")

    def entropy(self):
        """H = F(theta) - <theta, grad F(theta)> - E[k(x)], by autograd."""
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with fiamma.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = fiamma.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
