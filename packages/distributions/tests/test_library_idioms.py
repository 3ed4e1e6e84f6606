"""Idioms of probabilistic-programming libraries built on torch.distributions (Pyro, zuko,
normflows), reproduced without the libraries: each test is a pattern one of them relies on."""

import pytest

import fiamma
from fiamma.distributions import Normal, kl_divergence, register_kl


def test_register_kl_accepts_a_foreign_base_class():
    # Pyro registers KL pairs over its own mixin base class, which is not a subclass of
    # Distribution (PyTorch accepts any class there)
    class ForeignBase:
        pass

    class Mine(Normal, ForeignBase):
        pass

    @register_kl(Mine, ForeignBase)
    def _kl(p, q):
        return fiamma.tensor(42.0)

    class Other(ForeignBase):
        pass

    p = Mine(fiamma.tensor(0.0), fiamma.tensor(1.0))
    assert float(kl_divergence(p, Other())) == 42.0
    # the Normal-Normal pair still answers for plain Normals
    q = Normal(fiamma.tensor(0.0), fiamma.tensor(1.0))
    assert float(kl_divergence(q, q)) == 0.0


def test_register_kl_refuses_a_non_class():
    with pytest.raises(TypeError, match="register_kl.*type_p"):
        register_kl("Normal", Normal)
    with pytest.raises(TypeError, match="register_kl.*type_q"):
        register_kl(Normal, Normal(0.0, 1.0))
