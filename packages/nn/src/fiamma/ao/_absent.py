"""The error for a name of PyTorch's quantization API that needs int8 tensors."""


def absent(module, name, public):
    if name.startswith("__") or name in public:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    raise AttributeError(
        f"{module}.{name} is not available in fiamma: it needs quantized (int8) tensors and "
        "kernels, which fiamma does not have (fiamma computes in float16/bfloat16/float32/"
        "float64 and plain integer dtypes). What exists: " + ", ".join(sorted(public)))
