"""The error for a name of PyTorch's quantization API that fiamma has not built."""


def absent(module, name, public):
    if name.startswith("__") or name in public:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    raise AttributeError(
        f"{module}.{name} is not available in fiamma: fiamma's quantization is eager mode: "
        "static int8 quantization (post-training or quantization-aware training) with the "
        "modules ResNet/MobileNet-style models need, and dynamic quantization "
        "(quantize_dynamic: Linear and the recurrent layers); FX graph mode and the other "
        "int8 modules are not built yet. What exists: "
        + ", ".join(sorted(public)))
