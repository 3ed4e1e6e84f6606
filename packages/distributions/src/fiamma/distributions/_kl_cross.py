"""KL divergences between different families (the cross pairs of PyTorch's table). A pair
whose support of p is not inside the support of q is +inf everywhere."""

import math

import fiamma
from fiamma.distributions.categorical import Bernoulli
from fiamma.distributions.continuous import Gumbel, Laplace, Pareto, Uniform
from fiamma.distributions.counts import Binomial, Poisson
from fiamma.distributions.gamma import Beta, Exponential, Gamma
from fiamma.distributions.normal import Normal
from fiamma.distributions.relaxed import ContinuousBernoulli
from fiamma.distributions.utils import euler_constant

_LOG_2PI = math.log(2 * math.pi)


def register_cross_pairs(register_kl, infinite_like, x_log_x):
    def inf_where(mask, value):
        return fiamma.where(mask, math.inf, value)

    def infinite(first_param):
        def fn(p, q):
            return infinite_like(getattr(p, first_param))
        return fn

    for q_type in (Beta, ContinuousBernoulli, Pareto, Uniform):
        register_kl(Exponential, q_type)(infinite("rate"))
        register_kl(Gamma, q_type)(infinite("concentration"))
    register_kl(Beta, Pareto)(infinite("concentration1"))
    register_kl(ContinuousBernoulli, Pareto)(infinite("probs"))
    for q_type in (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform):
        register_kl(Gumbel, q_type)(infinite("loc"))
        register_kl(Laplace, q_type)(infinite("loc"))
        register_kl(Normal, q_type)(infinite("loc"))
    for q_type in (Beta, ContinuousBernoulli, Uniform):
        register_kl(Pareto, q_type)(infinite("scale"))
    register_kl(Poisson, Bernoulli)(infinite("rate"))
    register_kl(Poisson, Binomial)(infinite("rate"))

    @register_kl(Bernoulli, Poisson)
    def _kl_bernoulli_poisson(p, q):
        return -p.entropy() - (p.probs * q.rate.log() - q.rate)

    @register_kl(Beta, ContinuousBernoulli)
    def _kl_beta_continuous_bernoulli(p, q):
        return (-p.entropy() - p.mean * q.logits - (-q.probs).log1p()
                - q._cont_bern_log_norm())

    @register_kl(Beta, Exponential)
    def _kl_beta_exponential(p, q):
        return (-p.entropy() - q.rate.log()
                + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0)))

    @register_kl(Beta, Gamma)
    def _kl_beta_gamma(p, q):
        a, b = p.concentration1, p.concentration0
        t1 = -p.entropy()
        t2 = fiamma.lgamma(q.concentration) - q.concentration * q.rate.log()
        t3 = (q.concentration - 1) * (fiamma.digamma(a) - fiamma.digamma(a + b))
        t4 = q.rate * a / (a + b)
        return t1 + t2 - t3 + t4

    @register_kl(Beta, Normal)
    def _kl_beta_normal(p, q):
        a, b = p.concentration1, p.concentration0
        e_beta = a / (a + b)
        var_normal = q.scale.pow(2)
        t1 = -p.entropy()
        t2 = 0.5 * (var_normal * 2 * math.pi).log()
        t3 = (e_beta * (1 - e_beta) / (a + b + 1) + e_beta.pow(2)) * 0.5
        t4 = q.loc * e_beta
        t5 = q.loc.pow(2) * 0.5
        return t1 + t2 + (t3 - t4 + t5) / var_normal

    @register_kl(Beta, Uniform)
    def _kl_beta_uniform(p, q):
        result = -p.entropy() + (q.high - q.low).log()
        return inf_where((q.low > 0) | (q.high < 1), result)

    @register_kl(ContinuousBernoulli, Exponential)
    def _kl_continuous_bernoulli_exponential(p, q):
        return -p.entropy() - q.rate.log() + q.rate * p.mean

    @register_kl(ContinuousBernoulli, Normal)
    def _kl_continuous_bernoulli_normal(p, q):
        t1 = -p.entropy()
        t2 = 0.5 * (_LOG_2PI + q.scale.pow(2).log())
        t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean + q.loc.pow(2)) / (
            2.0 * q.scale.pow(2))
        return t1 + t2 + t3

    @register_kl(ContinuousBernoulli, Uniform)
    def _kl_continuous_bernoulli_uniform(p, q):
        # finite when [0, 1] lies inside [low, high] (PyTorch also returns inf at low == 0)
        result = -p.entropy() + (q.high - q.low).log()
        return inf_where((q.low > 0) | (q.high < 1), result)

    @register_kl(Exponential, Gamma)
    def _kl_exponential_gamma(p, q):
        ratio = q.rate / p.rate
        t1 = -q.concentration * ratio.log()
        return (t1 + ratio + fiamma.lgamma(q.concentration)
                + q.concentration * euler_constant - (1 + euler_constant))

    @register_kl(Exponential, Gumbel)
    def _kl_exponential_gumbel(p, q):
        scale_rate_prod = p.rate * q.scale
        loc_scale_ratio = q.loc / q.scale
        t1 = scale_rate_prod.log() - 1
        t2 = loc_scale_ratio.exp() * scale_rate_prod / (scale_rate_prod + 1)
        t3 = scale_rate_prod.reciprocal()
        return t1 - loc_scale_ratio + t2 + t3

    @register_kl(Exponential, Normal)
    def _kl_exponential_normal(p, q):
        var_normal = q.scale.pow(2)
        rate_sqr = p.rate.pow(2)
        t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi).log()
        t2 = rate_sqr.reciprocal()
        t3 = q.loc / p.rate
        t4 = q.loc.pow(2) * 0.5
        return t1 - 1 + (t2 - t3 + t4) / var_normal

    @register_kl(Gamma, Exponential)
    def _kl_gamma_exponential(p, q):
        return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate

    @register_kl(Gamma, Gumbel)
    def _kl_gamma_gumbel(p, q):
        c = p.concentration
        beta_scale_prod = p.rate * q.scale
        loc_scale_ratio = q.loc / q.scale
        t1 = (c - 1) * fiamma.digamma(c) - fiamma.lgamma(c) - c
        t2 = beta_scale_prod.log() + c / beta_scale_prod
        t3 = loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-c) - loc_scale_ratio
        return t1 + t2 + t3

    @register_kl(Gamma, Normal)
    def _kl_gamma_normal(p, q):
        c = p.concentration
        var_normal = q.scale.pow(2)
        beta_sqr = p.rate.pow(2)
        t1 = 0.5 * (beta_sqr * var_normal * 2 * math.pi).log() - c - fiamma.lgamma(c)
        t2 = 0.5 * (c.pow(2) + c) / beta_sqr
        t3 = q.loc * c / p.rate
        t4 = 0.5 * q.loc.pow(2)
        return t1 + (c - 1) * fiamma.digamma(c) + (t2 - t3 + t4) / var_normal

    @register_kl(Gumbel, Normal)
    def _kl_gumbel_normal(p, q):
        param_ratio = p.scale / q.scale
        t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
        t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
        t3 = ((p.loc + p.scale * euler_constant - q.loc) / q.scale).pow(2) * 0.5
        return -t1 + t2 + t3 - (euler_constant + 1)

    @register_kl(Laplace, Normal)
    def _kl_laplace_normal(p, q):
        var_normal = q.scale.pow(2)
        scale_sqr_var_ratio = p.scale.pow(2) / var_normal
        t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
        t2 = 0.5 * p.loc.pow(2)
        t3 = p.loc * q.loc
        t4 = 0.5 * q.loc.pow(2)
        return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1

    @register_kl(Normal, Gumbel)
    def _kl_normal_gumbel(p, q):
        mean_scale_ratio = p.loc / q.scale
        var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
        loc_scale_ratio = q.loc / q.scale
        t1 = var_scale_sqr_ratio.log() * 0.5
        t2 = mean_scale_ratio - loc_scale_ratio
        t3 = (-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio).exp()
        return -t1 + t2 + t3 - (0.5 * (1 + _LOG_2PI))

    @register_kl(Normal, Laplace)
    def _kl_normal_laplace(p, q):
        loc_diff = p.loc - q.loc
        scale_ratio = p.scale / q.scale
        loc_diff_scale_ratio = loc_diff / p.scale
        t1 = scale_ratio.log()
        t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * loc_diff_scale_ratio.pow(2)).exp()
        t3 = loc_diff * fiamma.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
        return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))

    @register_kl(Pareto, Exponential)
    def _kl_pareto_exponential(p, q):
        scale_rate_prod = p.scale * q.rate
        t1 = (p.alpha / scale_rate_prod).log()
        t2 = p.alpha.reciprocal()
        t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
        return inf_where(p.alpha <= 1, t1 - t2 + t3 - 1)

    @register_kl(Pareto, Gamma)
    def _kl_pareto_gamma(p, q):
        common_term = p.scale.log() + p.alpha.reciprocal()
        t1 = p.alpha.log() - common_term
        t2 = fiamma.lgamma(q.concentration) - q.concentration * q.rate.log()
        t3 = (1 - q.concentration) * common_term
        t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
        return inf_where(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)

    @register_kl(Pareto, Normal)
    def _kl_pareto_normal(p, q):
        var_normal = 2 * q.scale.pow(2)
        common_term = p.scale / (p.alpha - 1)
        t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
        t2 = p.alpha.reciprocal()
        t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
        t4 = (p.alpha * common_term - q.loc).pow(2)
        return inf_where(p.alpha <= 2, t1 - t2 + (t3 + t4) / var_normal - 1)

    @register_kl(Uniform, Beta)
    def _kl_uniform_beta(p, q):
        a, b = q.concentration1, q.concentration0
        width = p.high - p.low
        t1 = fiamma.lgamma(a) + fiamma.lgamma(b) - fiamma.lgamma(a + b)
        t2 = (a - 1) * (x_log_x(p.high) - x_log_x(p.low) - width) / width
        t3 = (b - 1) * (x_log_x(1 - p.high) - x_log_x(1 - p.low) + width) / width
        result = t3 + t1 - width.log() - t2
        return inf_where((p.high > 1) | (p.low < 0), result)

    @register_kl(Uniform, ContinuousBernoulli)
    def _kl_uniform_continuous_bernoulli(p, q):
        result = (-p.entropy() - p.mean * q.logits - (-q.probs).log1p()
                  - q._cont_bern_log_norm())
        return inf_where((p.high > 1) | (p.low < 0), result)

    @register_kl(Uniform, Exponential)
    def _kl_uniform_exponential(p, q):
        result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
        return inf_where(p.low < 0, result)

    @register_kl(Uniform, Gamma)
    def _kl_uniform_gamma(p, q):
        width = p.high - p.low
        t1 = width.log()
        t2 = fiamma.lgamma(q.concentration) - q.concentration * q.rate.log()
        t3 = (1 - q.concentration) * (x_log_x(p.high) - x_log_x(p.low) - width) / width
        t4 = q.rate * (p.high + p.low) / 2
        return inf_where(p.low < 0, -t1 + t2 + t3 + t4)

    @register_kl(Uniform, Gumbel)
    def _kl_uniform_gumbel(p, q):
        common_term = q.scale / (p.high - p.low)
        high_loc_diff = (p.high - q.loc) / q.scale
        low_loc_diff = (p.low - q.loc) / q.scale
        t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
        t2 = common_term * ((-high_loc_diff).exp() - (-low_loc_diff).exp())
        return t1 - t2

    @register_kl(Uniform, Normal)
    def _kl_uniform_normal(p, q):
        width = p.high - p.low
        t1 = (math.sqrt(math.pi * 2) * q.scale / width).log()
        t2 = width.pow(2) / 12
        t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
        return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)

    @register_kl(Uniform, Pareto)
    def _kl_uniform_pareto(p, q):
        width = p.high - p.low
        t = (q.alpha * q.scale.pow(q.alpha) * width).log()
        t2 = (x_log_x(p.high) - x_log_x(p.low) - width) / width
        return inf_where(p.low < q.scale, t2 * (q.alpha + 1) - t)
