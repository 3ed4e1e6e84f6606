"""Libraries that find arrays through the array API accept fiamma tensors: array-api-compat
resolves fiamma.array_api, and scikit-learn's array_api_dispatch fits LinearDiscriminantAnalysis,
PCA and Ridge on fiamma tensors with the results of NumPy inputs."""

import numpy as np
import pytest

import fiamma
import fiamma.array_api as xp

rng = np.random.default_rng(0)
X = rng.standard_normal((80, 5))
Y_CLASS = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(80) > 0).astype(np.int64)
Y_REG = X @ rng.standard_normal(5) + 0.1 * rng.standard_normal(80)


def test_array_api_compat_finds_the_namespace():
    compat = pytest.importorskip("array_api_compat")
    x = fiamma.zeros(3)
    assert compat.array_namespace(x) is xp
    assert compat.array_namespace(x, fiamma.ones(2, dtype=fiamma.int64)) is xp
    assert compat.is_array_api_obj(x)
    assert compat.device(x) == fiamma.device("cpu")
    assert compat.size(fiamma.zeros((2, 3))) == 6


@pytest.fixture
def sklearn_dispatch(monkeypatch):
    # scikit-learn refuses dispatch unless SciPy's array API mode is requested
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    sklearn = pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    with sklearn.config_context(array_api_dispatch=True):
        yield sklearn


def _np(t):
    assert type(t) is fiamma.Tensor, type(t)
    return t.numpy()


def test_pca(sklearn_dispatch):
    from sklearn.decomposition import PCA

    for solver in ("full", "covariance_eigh", "randomized"):
        kw = dict(n_components=3, svd_solver=solver, random_state=0)
        ref = PCA(**kw).fit(X)
        got = PCA(**kw).fit(fiamma.asarray(X))
        np.testing.assert_allclose(_np(got.explained_variance_), ref.explained_variance_,
                                   rtol=1e-8)
        np.testing.assert_allclose(_np(got.mean_), ref.mean_, rtol=1e-10, atol=1e-12)
        # components are defined up to sign; the projections agree once signs are aligned
        t_ref, t_got = ref.transform(X), _np(got.transform(fiamma.asarray(X)))
        signs = np.sign(np.sum(t_ref * t_got, axis=0))
        np.testing.assert_allclose(t_got * signs, t_ref, rtol=1e-7, atol=1e-9)
        back = _np(got.inverse_transform(got.transform(fiamma.asarray(X))))
        np.testing.assert_allclose(back, ref.inverse_transform(t_ref), rtol=1e-7, atol=1e-9)


def test_ridge(sklearn_dispatch):
    from sklearn.linear_model import Ridge

    ref = Ridge(alpha=0.7, solver="svd").fit(X, Y_REG)
    got = Ridge(alpha=0.7, solver="svd").fit(fiamma.asarray(X), fiamma.asarray(Y_REG))
    np.testing.assert_allclose(_np(got.coef_), ref.coef_, rtol=1e-9)
    np.testing.assert_allclose(float(got.intercept_), ref.intercept_, rtol=1e-9, atol=1e-12)


def test_lda(sklearn_dispatch):
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as LDA

    ref = LDA(solver="svd").fit(X, Y_CLASS)
    got = LDA(solver="svd").fit(fiamma.asarray(X), fiamma.asarray(Y_CLASS))
    np.testing.assert_allclose(_np(got.coef_), ref.coef_, rtol=1e-9)
    np.testing.assert_allclose(_np(got.intercept_), ref.intercept_, rtol=1e-9)
    np.testing.assert_allclose(_np(got.means_), ref.means_, rtol=1e-10)
    np.testing.assert_allclose(_np(got.priors_), ref.priors_)
    np.testing.assert_allclose(_np(got.explained_variance_ratio_),
                               ref.explained_variance_ratio_, rtol=1e-9)


def test_predict_after_fit(sklearn_dispatch):
    # scikit-learn's check_array reads NumPy's one-letter `dtype.kind` ("USV" ...) of every
    # array it validates: fiamma.dtype.kind answers in NumPy's letters
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as LDA
    from sklearn.linear_model import Ridge

    ref = Ridge(alpha=0.7, solver="svd").fit(X, Y_REG)
    got = Ridge(alpha=0.7, solver="svd").fit(fiamma.asarray(X), fiamma.asarray(Y_REG))
    np.testing.assert_allclose(_np(got.predict(fiamma.asarray(X))), ref.predict(X), rtol=1e-9)
    for solver in ("svd",):  # scikit-learn dispatches LDA only with the svd solver
        ref = LDA(solver=solver).fit(X, Y_CLASS)
        got = LDA(solver=solver).fit(fiamma.asarray(X), fiamma.asarray(Y_CLASS))
        np.testing.assert_array_equal(_np(got.predict(fiamma.asarray(X))), ref.predict(X))
        np.testing.assert_allclose(_np(got.predict_proba(fiamma.asarray(X))),
                                   ref.predict_proba(X), rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(_np(got.decision_function(fiamma.asarray(X))),
                                   ref.decision_function(X), rtol=1e-7, atol=1e-10)


def test_dispatch_off_leaves_numpy_paths():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.decomposition import PCA

    with sklearn.config_context(array_api_dispatch=False):
        # without dispatch scikit-learn converts through __array__ and returns NumPy arrays
        out = PCA(n_components=2).fit_transform(fiamma.asarray(X))
        assert isinstance(out, np.ndarray)
