"""``torch._dynamo.config``: flags of PyTorch's graph capture, with PyTorch's defaults for the
ones programs commonly read. fiamma runs eagerly, so setting a flag (any name) has no effect;
reading a flag that was never set and is not listed raises AttributeError.

>>> from fiamma._dynamo import config
>>> config.suppress_errors = True
>>> config.suppress_errors
True
"""

cache_size_limit = 8
recompile_limit = 8
accumulated_cache_size_limit = 256
accumulated_recompile_limit = 256
suppress_errors = False
verbose = False
inline_inbuilt_nn_modules = True
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
automatic_dynamic_shapes = True
assume_static_by_default = True
optimize_ddp = True
specialize_int = False
guard_nn_modules = True
