"""``fiamma.backends.xnnpack``: whether XNNPACK is used (never: fiamma has its own CPU
kernels)."""

enabled = False
