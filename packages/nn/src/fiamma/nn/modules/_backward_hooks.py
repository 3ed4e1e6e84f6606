"""Full backward hooks of a Module call.

The module's positional tensor inputs go through one identity ``Function`` and its outputs
through another; the output identity's backward sees ``grad_output`` (and runs the backward
pre-hooks, which may replace it), the input identity's backward sees ``grad_input`` once all
gradients of the module's inputs are summed (and runs the backward hooks, which may replace
it). Built only when a backward hook is registered, so plain calls pay nothing.
"""

import warnings

import fiamma
from fiamma.autograd import Function


class _Identity(Function):
    @staticmethod
    def forward(ctx, state, is_input, *tensors):
        ctx.set_materialize_grads(False)
        ctx.state, ctx.is_input = state, is_input
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors if len(tensors) != 1 else tensors[0]

    @staticmethod
    def backward(ctx, *grads):
        if ctx.is_input:
            grads = ctx.state.on_grad_input(grads)
        else:
            grads = ctx.state.on_grad_output(grads)
        return (None, None) + tuple(grads)


class BackwardHook:
    """The per-call state that connects a module's input and output identities."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.n_inputs = 0
        self.input_index = None  # positions of the inputs that went through the identity
        self.n_outputs = 0
        self.output_index = None
        self.grad_outputs = None

    @staticmethod
    def _pack(index, values, n):
        res = [None] * n
        for i, v in zip(index, values):
            res[i] = v
        return tuple(res)

    def _wrap(self, values, is_input):
        idx = [i for i, v in enumerate(values) if isinstance(v, fiamma.Tensor)]
        if not idx or not fiamma.is_grad_enabled() or not any(
                values[i].requires_grad for i in idx):
            return values, None
        new = _Identity.apply(self, is_input, *[values[i] for i in idx])
        if not isinstance(new, tuple):
            new = (new,)
        values = list(values)
        for i, v in zip(idx, new):
            values[i] = v
        return values, idx

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        if not self.hooks:
            return args
        values, self.input_index = self._wrap(list(args), True)
        return tuple(values)

    def setup_output_hook(self, out):
        single = not isinstance(out, (tuple, list))
        values = [out] if single else list(out)
        self.n_outputs = len(values)
        values, self.output_index = self._wrap(values, False)
        if single:
            return values[0]
        return type(out)(values) if isinstance(out, tuple) else list(values)

    def on_grad_output(self, grads):
        self.grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            res = hook(self.module, self.grad_outputs)
            if res is None:
                continue
            if not isinstance(res, tuple):
                res = (res,)
            if len(res) != len(self.grad_outputs):
                raise RuntimeError("Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(res)}, but expected "
                                   f"{len(self.grad_outputs)}")
            self.grad_outputs = res
        local = self.grad_outputs
        if self.input_index is None and self.hooks:
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html#"
                          "torch.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=2)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple)
                                            and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_index)

    def on_grad_input(self, grads):
        if self.grad_outputs is None:  # the gradient reached the inputs around the outputs
            return grads
        res = self._pack(self.input_index, grads, self.n_inputs)
        for hook in self.hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            if not isinstance(out, tuple):
                out = (out,)
            if len(out) != len(res):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                   f"got {len(out)}, but expected {len(res)}")
            res = out
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_index)
