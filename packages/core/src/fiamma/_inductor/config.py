"""``torch._inductor.config``: Inductor's flags, with PyTorch's defaults for the ones programs
commonly set. fiamma has no code generator, so setting a flag (any name) has no effect;
reading one that was never set and is not listed raises AttributeError."""

max_autotune = False
max_autotune_gemm = False
max_autotune_pointwise = False
coordinate_descent_tuning = False
freezing = False
fx_graph_cache = True
triton_cudagraphs = False
epilogue_fusion = True
force_fuse_int_mm_with_mul = False
use_mixed_mm = True
cpp_wrapper = False
debug = False
