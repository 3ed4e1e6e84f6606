"""KL divergence: ``kl_divergence(p, q)`` and the ``register_kl`` dispatch table, with the
closed forms of every pair PyTorch has (``torch.distributions.kl``).

Dispatch is PyTorch's: among the registered (type_p, type_q) pairs that ``p`` and ``q`` are
instances of, the most specific pair wins; when two pairs are equally specific in different
orders, a ``RuntimeWarning`` names them and the one that is most specific in ``p`` is used.
Results are memoised per pair of types; ``register_kl`` clears the memo.

>>> import fiamma
>>> from fiamma.distributions import Normal, kl_divergence
>>> kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item()
0.5
"""

import math
import warnings
from functools import total_ordering

import fiamma
from fiamma.distributions.categorical import Bernoulli, Categorical, OneHotCategorical
from fiamma.distributions.continuous import Cauchy, Gumbel, Laplace, Pareto, Uniform
from fiamma.distributions.counts import Binomial, Geometric, Poisson
from fiamma.distributions.exp_family import ExponentialFamily
from fiamma.distributions.gamma import Beta, Dirichlet, Exponential, Gamma
from fiamma.distributions.independent import Independent
from fiamma.distributions.multivariate_normal import (
    LowRankMultivariateNormal,
    MultivariateNormal,
    _batch_lowrank_logdet,
    _batch_lowrank_mahalanobis,
    _batch_mahalanobis,
)
from fiamma.distributions.normal import HalfNormal, Normal
from fiamma.distributions.relaxed import ContinuousBernoulli
from fiamma.distributions.transformed_distribution import TransformedDistribution
from fiamma.distributions.utils import _sum_rightmost, euler_constant, softplus

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}   # (type_p, type_q) -> function
_KL_MEMOIZE = {}    # (type_p, type_q) -> function, after dispatch


def register_kl(type_p, type_q):
    """Decorator registering a pairwise KL implementation ``fn(p, q)``.

    >>> from fiamma.distributions import Distribution, register_kl
    >>> class MyNormal(Distribution): pass
    >>> @register_kl(MyNormal, MyNormal)
    ... def kl_mine(p, q):
    ...     return 0.0
    """
    # any class is accepted, as in PyTorch: libraries register pairs over their own base
    # classes (Pyro's ``register_kl(Delta, pyro.distributions.Distribution)``, a mixin that
    # is not a subclass of this package's Distribution); only a non-class is refused
    if not isinstance(type_p, type):
        raise TypeError("register_kl: expected type_p to be a Distribution subclass but got "
                        f"{type_p!r}")
    if not isinstance(type_q, type):
        raise TypeError("register_kl: expected type_q to be a Distribution subclass but got "
                        f"{type_q!r}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun

    return decorator


@total_ordering
class _Match:
    __slots__ = ["types"]

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left_p.__name__}, {right_q.__name__})",
                      RuntimeWarning, stacklevel=3)
    return left_fun


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], over the batch shape.

    Raises ``NotImplementedError`` naming both types when no pair is registered.
    """
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)


def _infinite_like(t):
    return fiamma.full_like(t, math.inf)


def _x_log_x(t):
    return fiamma.xlogy(t, t)


def _batch_trace_XXT(bmat):
    """trace(X X^T) for a batch of matrices: the sum of squares."""
    return bmat.reshape(tuple(bmat.shape[:-2]) + (-1,)).pow(2).sum(-1)


def _inf_where(mask, value):
    return fiamma.where(mask, math.inf, value)


# same family ---------------------------------------------------------------------------------

@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = fiamma.where(p.probs == 0, 0.0, _inf_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = fiamma.where(p.probs == 1, 0.0, _inf_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = (fiamma.lgamma(q.concentration1) + fiamma.lgamma(q.concentration0)
          + fiamma.lgamma(sum_p))
    t2 = (fiamma.lgamma(p.concentration1) + fiamma.lgamma(p.concentration0)
          + fiamma.lgamma(sum_q))
    t3 = (p.concentration1 - q.concentration1) * fiamma.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * fiamma.digamma(p.concentration0)
    t5 = (sum_q - sum_p) * fiamma.digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count "
                                  "is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return _inf_where(p.total_count > q.total_count, kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = fiamma.where(p.probs == 0, 0.0, _inf_where(q.probs == 0, t))
    return t.sum(-1)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = fiamma.lgamma(sum_p) - fiamma.lgamma(sum_q)
    t2 = (fiamma.lgamma(p.concentration) - fiamma.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = fiamma.digamma(p.concentration) - fiamma.digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log-normaliser, by autograd (same family only)."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot be computed using Bregman divergences")
    p_nparams = [n.detach().requires_grad_() for n in p._natural_params]
    q_nparams = q._natural_params
    with fiamma.enable_grad():
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = fiamma.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        result = result - _sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = fiamma.lgamma(q.concentration) - fiamma.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * fiamma.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * euler_constant
    t3 = (ct2 + fiamma.lgamma(1 + ct1) - ct3).exp()
    return t1 + t2 + t3 - (1 + euler_constant)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


def _check_event(p, q):
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two (low-rank) multivariate normals with "
                         "different event shapes cannot be computed")


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmvn_lowrankmvn(p, q):
    _check_event(p, q)
    qW, qD = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    pW, pD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    term1 = (_batch_lowrank_logdet(qW, qD, q._capacitance_tril)
             - _batch_lowrank_logdet(pW, pD, p._capacitance_tril))
    term3 = _batch_lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    qWt_qDinv = qW.mT / qD.unsqueeze(-2)
    A = fiamma.linalg.solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)
    term21 = (pD / qD).sum(-1)
    term22 = _batch_trace_XXT(pW * qD.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_XXT(A * pD.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(A @ pW)
    term2 = term21 + term22 - term23 - term24
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    _check_event(p, q)
    qW, qD = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    pL = p._unbroadcasted_scale_tril
    term1 = (_batch_lowrank_logdet(qW, qD, q._capacitance_tril)
             - 2 * pL.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    term3 = _batch_lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    qWt_qDinv = qW.mT / qD.unsqueeze(-2)
    A = fiamma.linalg.solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)
    term21 = _batch_trace_XXT(pL * qD.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(A @ pL)
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    _check_event(p, q)
    pW, pD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    qL = q._unbroadcasted_scale_tril
    term1 = (2 * qL.diagonal(dim1=-2, dim2=-1).log().sum(-1)
             - _batch_lowrank_logdet(pW, pD, p._capacitance_tril))
    term3 = _batch_mahalanobis(qL, q.loc - p.loc)
    n = p.event_shape[0]
    batch = tuple(fiamma.broadcast_shapes(tuple(qL.shape[:-2]), tuple(pW.shape[:-2])))
    q_scale_tril = qL.expand(batch + (n, n))
    p_cov_factor = pW.expand(batch + (n, pW.shape[-1]))
    p_cov_diag = pD.sqrt().diag_embed().expand(batch + (n, n))
    term21 = _batch_trace_XXT(fiamma.linalg.solve_triangular(q_scale_tril, p_cov_factor,
                                                             upper=False))
    term22 = _batch_trace_XXT(fiamma.linalg.solve_triangular(q_scale_tril, p_cov_diag,
                                                             upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - n)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    _check_event(p, q)
    pL, qL = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = (qL.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - pL.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    n = p.event_shape[0]
    batch = tuple(fiamma.broadcast_shapes(tuple(qL.shape[:-2]), tuple(pL.shape[:-2])))
    term2 = _batch_trace_XXT(fiamma.linalg.solve_triangular(
        qL.expand(batch + (n, n)), pL.expand(batch + (n, n)), upper=False))
    term3 = _batch_mahalanobis(qL, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    return _inf_where(p.scale < q.scale, result)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if len(p.transforms) != len(q.transforms) or any(
            not (a == b) for a, b in zip(p.transforms, q.transforms)):
        raise NotImplementedError("KL between TransformedDistributions with different "
                                  "transforms is not implemented")
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise NotImplementedError("KL between TransformedDistributions with different event "
                                  "shapes is not implemented")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different "
                                  "reinterpreted_batch_ndims is not implemented")
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


from fiamma.distributions._kl_cross import register_cross_pairs  # noqa: E402

register_cross_pairs(register_kl, _infinite_like, _x_log_x)
