"""``fiamma.utils.data.dataset`` is ``fiamma.data.dataset`` (PyTorch's
``torch.utils.data.dataset`` path)."""

import sys

from fiamma.utils._sibling import require

sys.modules[__name__] = require("fiamma.data.dataset", "fiamma-data", __name__)
