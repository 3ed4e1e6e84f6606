"""``fiamma.utils.data._utils.worker`` is ``fiamma.data.dataloader``, the module that holds the
worker's ``_worker_info`` and ``get_worker_info`` (PyTorch's ``torch.utils.data._utils.worker``
path)."""

import sys

from fiamma.utils._sibling import require

sys.modules[__name__] = require("fiamma.data.dataloader", "fiamma-data", __name__)
