"""``fiamma.utils.data.sampler`` is ``fiamma.data.sampler`` (PyTorch's
``torch.utils.data.sampler`` path)."""

import sys

from fiamma.utils._sibling import require

sys.modules[__name__] = require("fiamma.data.sampler", "fiamma-data", __name__)
