"""``fiamma.functional`` (PyTorch's ``torch.functional``): the top-level functions under the
module's names; unknown names raise."""

import numpy as np
import pytest

import fiamma
import fiamma.functional as TF


def test_names_are_the_top_level_functions():
    for name in TF.__all__:
        assert getattr(TF, name) is getattr(fiamma, name)
    a = fiamma.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(TF.einsum("ij->j", a).numpy(), [3.0, 5.0, 7.0])
    assert [t.shape for t in TF.split(a, 1, dim=0)] == [(1, 3), (1, 3)]


def test_unknown_names_raise():
    assert TF.svd_lowrank is fiamma.svd_lowrank and TF.pca_lowrank is fiamma.pca_lowrank
    with pytest.raises(AttributeError, match="no_such"):
        TF.no_such


@pytest.mark.parity
def test_functional_names_parity():
    torch_functional = pytest.importorskip("torch.functional")

    missing = set(torch_functional.__all__) - set(TF.__all__)
    assert not missing
