from fiamma.nn.modules.activation import *  # noqa: F401,F403
from fiamma.nn.modules.adaptive import *  # noqa: F401,F403
from fiamma.nn.modules.batchnorm import *  # noqa: F401,F403
from fiamma.nn.modules.container import *  # noqa: F401,F403
from fiamma.nn.modules.conv import *  # noqa: F401,F403
from fiamma.nn.modules.distance import *  # noqa: F401,F403
from fiamma.nn.modules.dropout import *  # noqa: F401,F403
from fiamma.nn.modules.fold import *  # noqa: F401,F403
from fiamma.nn.modules.instancenorm import *  # noqa: F401,F403
from fiamma.nn.modules.lazy import *  # noqa: F401,F403
from fiamma.nn.modules.linear import *  # noqa: F401,F403
from fiamma.nn.modules.linear_cross_entropy_options import *  # noqa: F401,F403
from fiamma.nn.modules.loss import *  # noqa: F401,F403
from fiamma.nn.modules.module import Module  # noqa: F401
from fiamma.nn.modules.normalization import *  # noqa: F401,F403
from fiamma.nn.modules.padding import *  # noqa: F401,F403
from fiamma.nn.modules.pixelshuffle import *  # noqa: F401,F403
from fiamma.nn.modules.pooling import *  # noqa: F401,F403
from fiamma.nn.modules.rnn import *  # noqa: F401,F403
from fiamma.nn.modules.sparse import *  # noqa: F401,F403
from fiamma.nn.modules.transformer import *  # noqa: F401,F403
from fiamma.nn.modules.upsampling import *  # noqa: F401,F403


def __getattr__(name):
    # fiamma.nn.modules.utils (PyTorch's torch.nn.modules.utils: _pair & co.) loads on first
    # use; it is not imported here, since this package's names are star-imported into
    # fiamma.nn, whose own ``utils`` is another module
    if name == "utils":
        import importlib

        return importlib.import_module("fiamma.nn.modules.utils")
    raise AttributeError(f"module 'fiamma.nn.modules' has no attribute {name!r}")
