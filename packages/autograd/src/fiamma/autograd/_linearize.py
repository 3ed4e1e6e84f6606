"""Jacobian-vector products by the double-vjp identity (shared by ``fiamma.autograd.forward_ad``
and ``fiamma.func``'s ``jvp``/``jacfwd``/``linearize``).

With ``u(v) = J^T v`` recorded (``create_graph``) as a function of a dummy cotangent ``v``
(ones that require grad), ``u`` is linear in ``v`` and the vjp of ``u`` with cotangent ``t``,
taken w.r.t. ``v``, is ``J t``: exact, about two backward passes per tangent.

``v`` is ones, not zeros: a few gradient formulas are linear in the incoming gradient only away
from 0 (xlogy's ``xlogy(grad, y)`` is 0 at a zero gradient whatever ``y``, PyTorch's convention),
and differentiated at 0 they would drop the infinite or NaN derivative there.
"""

import fiamma


class Linearized:
    """``u = J^T v`` for outputs ``outs`` w.r.t. ``inputs`` (tensors that require grad);
    :meth:`apply` gives ``J t`` for tangents ``t`` (one per input)."""

    def __init__(self, outs, inputs):
        from fiamma.autograd import grad

        self.outs = list(outs)
        self.v = [fiamma.ones_like(o).requires_grad_(True) if o.requires_grad else None
                  for o in self.outs]
        pairs = [(o, v) for o, v in zip(self.outs, self.v) if v is not None]
        with fiamma.enable_grad():
            if pairs:
                us = grad([o for o, _ in pairs], list(inputs), [v for _, v in pairs],
                          retain_graph=True, create_graph=True, allow_unused=True)
            else:
                us = [None] * len(inputs)
        self.u = [None if u is None or not u.requires_grad else u for u in us]

    def apply(self, tangents, create_graph):
        """``J t`` for tangents ``t`` (one per input): one tensor per output (zeros where
        the output does not depend on the inputs)."""
        from fiamma.autograd import grad

        pairs = [(u, t) for u, t in zip(self.u, tangents) if u is not None and t is not None]
        vs = [v for v in self.v if v is not None]
        res = [None] * len(vs)
        if pairs and vs:
            with fiamma.enable_grad():
                res = grad([u for u, _ in pairs], vs, [t for _, t in pairs], retain_graph=True,
                           create_graph=create_graph, allow_unused=True)
        it = iter(res)
        out = []
        for o, v in zip(self.outs, self.v):
            r = next(it) if v is not None else None
            out.append(fiamma.zeros_like(o) if r is None else r)
        return out
