"""Lazy modules: layers whose input size (``in_features``, ``in_channels``, ``num_features``)
is read from the first input they see, as PyTorch's ``nn.LazyLinear`` & co.

Until that first call their parameters and buffers are ``UninitializedParameter`` /
``UninitializedBuffer`` placeholders (dtype and device known, shape not). The first forward
materialises them in place, initialises them as the eager layer would, drops the hooks and
turns the module into its eager class (``LazyLinear`` becomes ``Linear``), so the steps after it
cost what the eager layer costs. Loading a state dict into a lazy module materialises its
placeholders with the loaded shapes.

>>> import fiamma
>>> from fiamma import nn
>>> m = nn.LazyLinear(4)
>>> m.has_uninitialized_params()
True
>>> m(fiamma.ones(2, 3)).shape
fiamma.Size([2, 4])
>>> type(m).__name__, m.in_features, tuple(m.weight.shape)
('Linear', 3, (4, 3))
"""

import itertools

import fiamma
from fiamma.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from fiamma.nn.modules.conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from fiamma.nn.modules.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from fiamma.nn.modules.linear import Linear
from fiamma.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    """The mixin of modules whose parameters' shapes come from their first input (PyTorch's
    ``nn.modules.lazy.LazyModuleMixin``): a subclass defines ``initialize_parameters(*args,
    **kwargs)`` (materialise the placeholders from the forward's arguments) and may name
    ``cls_to_become``, the class the module turns into once initialised. A forward pre-hook
    calls ``initialize_parameters`` at the first call, then removes itself."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # module-level functions, not bound methods or closures: a deepcopy or pickle of the
        # module then carries hooks that act on the copy
        self._load_hook = self.register_load_state_dict_pre_hook(_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(_infer_hook, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # placeholders are saved as they are (a module saved before its first call loads into
        # another lazy module); everything else as the base class does
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = (param if is_lazy(param) or keep_vars
                                              else param.detach())
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if is_lazy(buf) or keep_vars else buf.detach()

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys,
                        unexpected_keys, error_msgs):
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if param is None or key not in state_dict or not is_lazy(param):
                continue
            value = state_dict[key]
            if not is_lazy(value) and isinstance(value, fiamma.Tensor):
                with fiamma.no_grad():
                    param.materialize(tuple(value.shape))

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}")

    def has_uninitialized_params(self):
        """Whether any of this module's own parameters or buffers is still a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(),
                                                        self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        del module._initialize_hook
        del module._load_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with "
                           "`DataParallel`. Run a dummy forward pass to correctly initialize "
                           "the modules")


def _load_hook(module, *args):
    module._lazy_load_hook(*args)


def _infer_hook(module, args, kwargs):
    module._infer_parameters(module, args, kwargs)


def _check_input(module, input):
    if not isinstance(input, fiamma.Tensor):
        raise TypeError(f"{type(module).__name__}: expected a Tensor as the first input (its "
                        f"size sets the layer's input size), got {type(input).__name__}")


class LazyLinear(LazyModuleMixin, Linear):
    """``nn.Linear`` whose ``in_features`` is the last dimension of the first input.

    >>> m = LazyLinear(2)
    >>> tuple(m(fiamma.ones(5, 7)).shape), m.in_features
    ((5, 2), 7)
    """

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        _check_input(self, input)
        if input.dim() == 0:
            raise RuntimeError(f"{type(self).__name__}: expected an input with at least one "
                               "dimension (its last one is in_features), got a 0-d tensor")
        with fiamma.no_grad():
            self.in_features = int(input.shape[-1])
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class _LazyConvXdMixin(LazyModuleMixin):
    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input):
        nd = self._nd
        if input.dim() not in (nd + 1, nd + 2):
            raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input "
                               f"to {type(self).__name__}, but got input of size: "
                               f"{list(input.shape)}")
        return int(input.shape[1] if input.dim() == nd + 2 else input.shape[0])

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        _check_input(self, input)
        with fiamma.no_grad():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self._transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize(shape + tuple(self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy_conv_init(self, out_channels, bias, device, dtype):
    self.weight = UninitializedParameter(device=device, dtype=dtype)
    self.out_channels = out_channels
    if bias:
        self.bias = UninitializedParameter(device=device, dtype=dtype)


def _make_lazy_conv(base, transposed):
    nd = base._nd
    if transposed:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                     groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                     dtype=None):
            LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, output_padding,
                                     groups, False, dilation, padding_mode)
            _lazy_conv_init(self, out_channels, bias, device, dtype)
        what, where = "ConvTranspose", "in_channels (dim 1 of a batched input)"
    else:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                     groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
            LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups,
                                     False, padding_mode)
            _lazy_conv_init(self, out_channels, bias, device, dtype)
        what, where = "Conv", "in_channels (dim 1 of a batched input)"
    name = f"Lazy{what}{nd}d"
    doc = (f"``nn.{what}{nd}d`` whose {where} comes from the first input; it becomes a "
           f"``{what}{nd}d`` after that call.")
    return type(name, (_LazyConvXdMixin, base), {
        "__init__": __init__, "cls_to_become": base, "__doc__": doc,
        "__module__": __name__, "__qualname__": name})


LazyConv1d = _make_lazy_conv(Conv1d, False)
LazyConv2d = _make_lazy_conv(Conv2d, False)
LazyConv3d = _make_lazy_conv(Conv3d, False)
LazyConvTranspose1d = _make_lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _make_lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _make_lazy_conv(ConvTranspose3d, True)


class _LazyNormBase(LazyModuleMixin):
    def _lazy_norm_init(self, affine, track_running_stats, bias, device, dtype):
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = fiamma.tensor(0, dtype=fiamma.int64, device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _features_dim(self, input):
        return 1

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        _check_input(self, input)
        d = self._features_dim(input)
        if input.dim() <= d:
            raise RuntimeError(f"{type(self).__name__}: expected an input with a feature "
                               f"dimension {d}, got a {input.dim()}-d tensor")
        with fiamma.no_grad():
            self.num_features = int(input.shape[d])
            for name in ("weight", "bias", "running_mean", "running_var"):
                t = getattr(self, name, None)
                if is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


def _make_lazy_norm(base, instance):
    # the lazy instance norms default to affine=True and track_running_stats=True as
    # PyTorch's do (unlike the eager InstanceNorm classes)
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        LazyModuleMixin.__init__(self, 0, eps, momentum, False, False, bias=False)
        self._lazy_norm_init(affine, track_running_stats, bias, device, dtype)

    attrs = {"__init__": __init__, "cls_to_become": base, "__module__": __name__}
    if instance:
        def _features_dim(self, input):  # unbatched (C, *spatial) input: channels at dim 0
            return 0 if input.dim() == self._no_batch_dim else 1
        attrs["_features_dim"] = _features_dim
    name = "Lazy" + base.__name__
    attrs["__qualname__"] = name
    attrs["__doc__"] = (f"``nn.{base.__name__}`` whose ``num_features`` is the channel count "
                        f"of the first input; it becomes a ``{base.__name__}`` after that call.")
    return type(name, (_LazyNormBase, base), attrs)


LazyBatchNorm1d = _make_lazy_norm(BatchNorm1d, False)
LazyBatchNorm2d = _make_lazy_norm(BatchNorm2d, False)
LazyBatchNorm3d = _make_lazy_norm(BatchNorm3d, False)
LazyInstanceNorm1d = _make_lazy_norm(InstanceNorm1d, True)
LazyInstanceNorm2d = _make_lazy_norm(InstanceNorm2d, True)
LazyInstanceNorm3d = _make_lazy_norm(InstanceNorm3d, True)
