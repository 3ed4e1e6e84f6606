"""``fiamma.utils.data.dataloader`` is ``fiamma.data.dataloader`` (PyTorch's
``torch.utils.data.dataloader`` path)."""

import sys

from fiamma.utils._sibling import require

sys.modules[__name__] = require("fiamma.data.dataloader", "fiamma-data", __name__)
