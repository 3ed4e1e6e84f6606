__path__ = __import__("pkgutil").extend_path(__path__, __name__)

__doc__ = """fiamma: tensors with PyTorch's API, kernels in C.

``import fiamma`` loads only core. Sibling distributions (fiamma.nn, fiamma.optim, ...) are
imported on first attribute access; a missing one raises an error naming what to install.

>>> import fiamma
>>> fiamma.arange(6).reshape(2, 3).sum(1).tolist()
[3, 12]
"""

from fiamma._version import __version__
from fiamma._dtype import (  # noqa: F401
    dtype, bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
    complex64, complex128, cfloat, cdouble, uint16, uint32, uint64,
    half, float, double, short, int, long, promote_types, result_type, can_cast,
    get_default_dtype, set_default_dtype, finfo, iinfo,
    float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu,
    complex32, chalf,
    uint1, uint2, uint3, uint4, uint5, uint6, uint7, int1, int2, int3, int4, int5, int6, int7,
)
from fiamma._storage import device  # noqa: F401
from fiamma._tensor import Tensor, Size  # noqa: F401
from fiamma._grad_hook import is_grad_enabled, is_inference_mode_enabled  # noqa: F401
from fiamma._grad_mode import no_grad, enable_grad, set_grad_enabled, inference_mode  # noqa: F401
from fiamma._creation import *  # noqa: F401,F403
from fiamma._random import *  # noqa: F401,F403
from fiamma._interop import *  # noqa: F401,F403
from fiamma._ops.elementwise import *  # noqa: F401,F403
from fiamma._ops.reduce import *  # noqa: F401,F403
from fiamma._ops.matmul import *  # noqa: F401,F403
from fiamma._ops.join import *  # noqa: F401,F403
from fiamma._ops.indexing import *  # noqa: F401,F403
from fiamma._ops.indexops import *  # noqa: F401,F403
from fiamma._ops.shape import *  # noqa: F401,F403
from fiamma._ops.special_ops import *  # noqa: F401,F403
from fiamma._ops.spectral import *  # noqa: F401,F403
from fiamma._ops.sorting import *  # noqa: F401,F403
from fiamma._ops.norm import *  # noqa: F401,F403
from fiamma._ops.sample import *  # noqa: F401,F403
from fiamma._ops.pool import *  # noqa: F401,F403
from fiamma._ops.conv import *  # noqa: F401,F403
from fiamma._ops.activations import *  # noqa: F401,F403
from fiamma._ops.complex_ops import *  # noqa: F401,F403
from fiamma._ops.xent import *  # noqa: F401,F403
from fiamma._ops.nll_embedding import embedding, embedding_renorm_  # noqa: F401
from fiamma._ops.attention import *  # noqa: F401,F403
from fiamma._ops.rnn import *  # noqa: F401,F403

from fiamma._tensor_api import *  # noqa: F401,F403
from fiamma._compat_ops import *  # noqa: F401,F403
from fiamma._legacy_types import *  # noqa: F401,F403
from fiamma._storage_api import UntypedStorage, TypedStorage  # noqa: F401
from fiamma._storage_api import (  # noqa: F401  (PyTorch's legacy storage classes)
    BFloat16Storage, BoolStorage, ByteStorage, CharStorage, ComplexDoubleStorage,
    ComplexFloatStorage, DoubleStorage, FloatStorage, HalfStorage, IntStorage, LongStorage,
    ShortStorage, from_file,
)
from fiamma._storage_api import FloatStorage as Storage  # noqa: F401  (torch.Storage)
from fiamma._errors import OutOfMemoryError  # noqa: F401
from fiamma._generic_stream import Stream, Event  # noqa: F401  (torch.Stream, torch.Event)
from fiamma._allocator import *  # noqa: F401,F403
from fiamma._parallel import *  # noqa: F401,F403
from fiamma.serialization import save, load  # noqa: F401  (light: imports its machinery on call)
from fiamma._layout import (  # noqa: F401
    layout, strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, jagged,
)
from fiamma._memory_format import (  # noqa: F401
    channels_last,
    channels_last_3d,
    contiguous_format,
    legacy_contiguous_format,
    memory_format,
    preserve_format,
)
from fiamma._sparse_coo import sparse_coo_tensor, indices_copy, values_copy  # noqa: F401
from fiamma._sparse_ops import spmm, smm  # noqa: F401
from fiamma._sparse_compressed import (  # noqa: F401
    sparse_compressed_tensor, sparse_csr_tensor, sparse_csc_tensor, sparse_bsr_tensor,
    sparse_bsc_tensor, crow_indices_copy, col_indices_copy, ccol_indices_copy, row_indices_copy,
)
from fiamma._sparse_compressed_ops import (  # noqa: F401
    hspmm, sspaddmm, saddmm, dsmm, hsmm, segment_reduce,
)
from fiamma._foreach import *  # noqa: F401,F403  (torch._foreach_* list ops)
from fiamma._ops.linalg_extra import *  # noqa: F401,F403
from fiamma._ops.poisson_binomial import *  # noqa: F401,F403
# (new op modules: one `from fiamma._ops.<area> import *` line each, above this comment)
from fiamma import _methods  # noqa: F401,E402  (attaches the op modules' Tensor methods, once)
from fiamma._np_kwargs import wrap_namespace as _wrap_namespace  # noqa: E402

# NumPy's axis=/keepdims= accepted for dim=/keepdim= by the top-level functions, as PyTorch's
_wrap_namespace(globals(), [_n for _n in list(globals()) if not _n.startswith("_")])

# submodules of core that are imported on first use (import time stays small)
_SUBMODULES = {"linalg", "fft", "special", "multiprocessing", "safetensors", "utils", "fused",
               "backends", "accelerator", "cuda", "amp", "cpu", "hub", "testing",
               "detection", "profiler", "sparse", "array_api", "ops", "xpu", "mps", "futures",
               "_dynamo", "functional", "compiler", "_inductor", "nested", "signal", "types",
               "storage", "torch_version", "library", "quasirandom", "mtia", "__future__",
               "overrides"}

# sibling distributions, imported on first use
_SIBLINGS = {
    "autograd": "fiamma-autograd",
    "nn": "fiamma-nn",
    "fx": "fiamma-nn",
    "func": "fiamma-nn",
    "ao": "fiamma-nn",
    "quantization": "fiamma-nn",
    "functorch": "fiamma-nn",
    "optim": "fiamma-optim",
    "data": "fiamma-data",
    "vision": "fiamma-vision",
    "audio": "fiamma-audio",
    "distributed": "fiamma-distributed",
    "distributions": "fiamma-distributions",
    "jit": "fiamma-export",
    "onnx": "fiamma-export",
    "export": "fiamma-export",
}

# PyTorch's top-level names for functions of a core submodule, imported on first use
_FROM_SUBMODULE = {"autocast": "amp", "is_autocast_enabled": "amp",
                   "get_autocast_dtype": "amp", "set_autocast_enabled": "amp",
                   "set_autocast_dtype": "amp", "PyTorchFileReader": "_file_reader",
                   "cond": "_cond"}
# PyTorch's deprecated IPU/XLA autocast state functions (no op reads them: see amp)
_FROM_SUBMODULE.update(dict.fromkeys((
    "is_autocast_ipu_enabled", "is_autocast_xla_enabled", "set_autocast_ipu_enabled",
    "set_autocast_xla_enabled", "get_autocast_ipu_dtype", "get_autocast_xla_dtype",
    "set_autocast_ipu_dtype", "set_autocast_xla_dtype",
    # and the older CPU/GPU ones, the cache switch and the nesting counter
    "is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "get_autocast_cpu_dtype",
    "set_autocast_cpu_dtype", "get_autocast_gpu_dtype", "set_autocast_gpu_dtype",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "autocast_increment_nesting",
    "autocast_decrement_nesting", "clear_autocast_cache"), "amp.autocast_mode"))
_FROM_SUBMODULE["GradScaler"] = "amp"  # torch.GradScaler is torch.amp.GradScaler
# torch.Future (fiamma.futures.Future) and the __torch_function__ switches of torch._C
_FROM_SUBMODULE.update({"Future": "futures", "DisableTorchFunction": "_torch_function",
                        "DisableTorchFunctionSubclass": "_torch_function"})

# PyTorch's top-level ATen bindings of nn functions (torch.dropout(input, p, train),
# torch.kl_div(input, target, reduction=1), torch.lstm_cell, ...): fiamma-nn's fiamma.nn.aten
_FROM_NN_ATEN = frozenset((
    "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_dropout",
    "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "native_dropout",
    "bilinear", "binary_cross_entropy_with_logits", "constant_pad_nd",
    "cosine_embedding_loss", "hinge_embedding_loss", "kl_div", "margin_ranking_loss",
    "poisson_nll_loss", "triplet_margin_loss", "ctc_loss", "grid_sampler_2d", "grid_sampler_3d",
    "affine_grid_generator", "native_channel_shuffle", "norm_except_dim", "conv_tbc",
    "rnn_tanh_cell", "rnn_relu_cell", "gru_cell", "lstm_cell", "rnn_tanh", "rnn_relu", "gru",
    "lstm"))

# PyTorch's top-level names for functions of a sibling distribution (torch.vmap is func.vmap)
_FROM_SIBLING = {"vmap": "func", "ScriptModule": "jit"}
# the autograd anomaly-mode switches (torch.is_anomaly_enabled, ...) are fiamma-autograd's
_FROM_SIBLING.update(dict.fromkeys((
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_anomaly_enabled"), "autograd"))
# quantized tensors (int8 dtypes, qschemes, quantize/dequantize) live in fiamma-nn's fiamma.ao
_FROM_SIBLING.update(dict.fromkeys((
    "quint8", "qint8", "qint32", "quint4x2", "per_tensor_affine", "per_channel_affine",
    "per_tensor_symmetric", "per_channel_symmetric", "per_channel_affine_float_qparams",
    "quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic",
    "dequantize"), "ao"))


def __getattr__(name):
    if name in _FROM_SUBMODULE:
        import importlib

        return getattr(importlib.import_module("fiamma." + _FROM_SUBMODULE[name]), name)
    if name in _FROM_SIBLING:
        return getattr(__getattr__(_FROM_SIBLING[name]), name)
    if name in _FROM_NN_ATEN:
        import importlib

        try:
            return getattr(importlib.import_module("fiamma.nn.aten"), name)
        except ModuleNotFoundError as e:
            if e.name not in ("fiamma.nn", "fiamma.nn.aten"):
                raise
            raise AttributeError(f"fiamma.{name} is fiamma-nn's (fiamma.nn.aten): pip install "
                                 "fiamma-nn") from None
    if name in _SUBMODULES:
        import importlib

        try:
            return importlib.import_module("fiamma." + name)
        except ModuleNotFoundError as e:
            if e.name != "fiamma." + name:
                raise
            raise AttributeError(f"module 'fiamma' has no attribute {name!r}") from None
    if name in _SIBLINGS:
        import importlib

        try:
            return importlib.import_module("fiamma." + name)
        except ModuleNotFoundError as e:
            if e.name != "fiamma." + name:
                raise
            raise AttributeError(
                f"fiamma.{name} is not installed: pip install {_SIBLINGS[name]}") from None
    raise AttributeError(f"module 'fiamma' has no attribute {name!r}")
