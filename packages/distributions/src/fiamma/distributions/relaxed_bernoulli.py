"""``torch.distributions.relaxed_bernoulli`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``LogitRelaxedBernoulli``, ``RelaxedBernoulli``)."""

from fiamma.distributions import LogitRelaxedBernoulli, RelaxedBernoulli  # noqa: F401

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]
