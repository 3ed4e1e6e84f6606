"""``MixtureSameFamily``: a mixture whose components are the batch entries of one distribution.

>>> import fiamma
>>> from fiamma.distributions import Categorical, MixtureSameFamily, Normal
>>> mix = Categorical(probs=fiamma.tensor([0.5, 0.5]))
>>> comp = Normal(fiamma.tensor([-1.0, 1.0]), fiamma.tensor([1.0, 1.0]))
>>> gmm = MixtureSameFamily(mix, comp)
>>> gmm.mean.item(), tuple(gmm.sample((3,)).shape)
(0.0, (3,))
"""

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.categorical import Categorical
from fiamma.distributions.distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """p(x) = sum_k pi_k p_k(x), with ``mixture_distribution`` a ``Categorical`` over the
    rightmost batch dim of ``component_distribution`` (whose other batch dims broadcast)."""

    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("MixtureSameFamily: the mixture distribution needs to be an "
                             f"instance of Categorical, got {type(mixture_distribution)}")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("MixtureSameFamily: the component distribution needs to be an "
                             "instance of Distribution")
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        if len(component_distribution.batch_shape) < 1:
            raise ValueError("MixtureSameFamily: the component distribution needs at least "
                             "one batch dimension (the components)")
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError("`mixture_distribution.batch_shape` "
                                 f"({mdbs}) is not compatible with "
                                 f"`component_distribution.batch_shape` ({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"MixtureSameFamily: mixture_distribution has {km} components "
                             f"but component_distribution has {kc}")
        self._num_component = km
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(cdbs, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = fiamma.Size(tuple(batch_shape))
        batch_shape_comp = tuple(batch_shape) + (self._num_component,)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(batch_shape_comp)
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        super(MixtureSameFamily, new).__init__(batch_shape, self.event_shape,
                                               validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    def _pad_mixture_dimensions(self, x):
        for _ in range(self._event_ndims):
            x = x.unsqueeze(-1)
        return x

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        d = -1 - self._event_ndims
        mean_cond_var = (probs * self.component_distribution.variance).sum(d)
        diff = self.component_distribution.mean - self._pad(self.mean)
        var_cond_mean = (probs * diff.pow(2)).sum(d)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        x = self._pad(x)
        cdf_x = self.component_distribution.cdf(x)
        return (cdf_x * self.mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        x = self._pad(x)
        log_prob_x = self.component_distribution.log_prob(x)
        log_mix_prob = fiamma.log_softmax(self.mixture_distribution.logits, -1)
        return (log_prob_x + log_mix_prob).logsumexp(-1)

    def sample(self, sample_shape=()):
        with fiamma.no_grad():
            sample_shape = tuple(sample_shape)
            gather_dim = len(sample_shape) + len(self.batch_shape)
            es = tuple(self.event_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)
            mix_shape = tuple(mix_sample.shape)
            comp_samples = self.component_distribution.sample(sample_shape)
            index = mix_sample.reshape(mix_shape + (1,) * (len(es) + 1))
            index = index.expand(mix_shape + (1,) + es)
            samples = comp_samples.gather(gather_dim, index)
            return samples.squeeze(gather_dim)

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self.mixture_distribution},\n  "
                f"{self.component_distribution})")
