"""Adaptive softmax (Grave et al., "Efficient softmax approximation for GPUs"): PyTorch's
``nn.AdaptiveLogSoftmaxWithLoss``.

The classes, sorted by frequency, are cut at ``cutoffs`` into a head (the most frequent
``cutoffs[0]`` classes plus one entry per tail cluster) and tail clusters, each scored by a
low-rank projection whose width shrinks by ``div_value`` per cluster. The log-probability of a
class in cluster ``i`` is the head's log-probability of the cluster plus the cluster's own
log-softmax of the class.

>>> import fiamma
>>> asm = AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 8])
>>> out = asm(fiamma.randn(3, 8), fiamma.tensor([0, 5, 9]))
>>> tuple(out.output.shape), tuple(out.loss.shape)
((3,), ())
>>> bool(asm.log_prob(fiamma.randn(2, 8)).exp().sum(1).sub(1).abs().max() < 1e-5)
True
"""

from collections import namedtuple

import fiamma
from fiamma.nn import functional as F
from fiamma.nn.modules.container import ModuleList, Sequential
from fiamma.nn.modules.linear import Linear
from fiamma.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive log-softmax over ``n_classes`` classes cut at ``cutoffs`` (see the module's
    docstring). ``forward(input, target)`` returns ``(output, loss)``: each row's target
    log-probability and the mean negative log-likelihood; ``log_prob(input)`` gives every
    class's log-probability, ``predict(input)`` the most likely class."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        f = {"device": device, "dtype": dtype}
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = [int(c) for c in cutoffs] + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **f)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **f),
                                        Linear(hidden, size, bias=False, **f)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for projection in self.tail:
            for lin in projection:
                lin.reset_parameters()

    def forward(self, input_, target_):
        td = target_.dim()
        if td == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {list(input_.shape)}")
        elif td == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {list(input_.shape)}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = td > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        if target.numel() and bool(((target < 0) | (target >= self.n_classes)).any()):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{target.min().item()}, "
                               f"{target.max().item()}] were found. ")
        n = target.shape[0]
        out = input.new_zeros(n)
        head_index = target.clone()  # shortlist rows pick their class in the head
        for i in range(self.n_clusters):
            lo, hi = self.cutoffs[i], self.cutoffs[i + 1]
            rows = ((target >= lo) & (target < hi)).nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            logp = F.log_softmax(self.tail[i](input.index_select(0, rows)), dim=1)
            local = logp.gather(1, (target.index_select(0, rows) - lo).unsqueeze(1))
            out = out.index_add(0, rows, local.squeeze(1))
            # the other rows pick their cluster's entry in the head
            head_index = head_index.index_fill(0, rows, self.shortlist_size + i)
        head_logp = F.log_softmax(self.head(input), dim=1)
        out = out + head_logp.gather(1, head_index.unsqueeze(1)).squeeze(1)
        loss = (-out).mean()
        return _ASMoutput(out if batched else out.squeeze(0), loss)

    def _full_log_prob(self, input, head_output):
        head_logp = F.log_softmax(head_output, dim=1)
        parts = [head_logp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            logp = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(logp + head_logp[:, self.shortlist_size + i].unsqueeze(1))
        return fiamma.cat(parts, dim=1)

    def _check_features(self, input, name):
        if input.dim() not in (1, 2) or input.shape[-1] != self.in_features:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss.{name}: expected a 1D or 2D input "
                               f"with {self.in_features} features, got shape "
                               f"{list(input.shape)}")

    def log_prob(self, input):
        """Log-probabilities of all ``n_classes`` classes, shape (N, n_classes) or
        (n_classes,) for a 1-D input."""
        self._check_features(input, "log_prob")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class of each row (cheaper than ``log_prob(input).argmax(1)``: the
        tail clusters are scored only for rows whose head prediction is a cluster)."""
        self._check_features(input, "predict")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        head_output = self.head(x)
        out = head_output.argmax(dim=1)
        beyond = out >= self.shortlist_size
        if bool(beyond.any()):
            rows = beyond.nonzero().reshape(-1)
            full = self._full_log_prob(x.index_select(0, rows), head_output.index_select(0, rows))
            out = out.index_copy(0, rows, full.argmax(dim=1))
        return out if batched else out.squeeze(0)
