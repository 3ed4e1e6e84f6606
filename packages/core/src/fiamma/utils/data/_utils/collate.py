"""``fiamma.utils.data._utils.collate`` is ``fiamma.data._collate`` (PyTorch's
``torch.utils.data._utils.collate`` path: ``collate``, ``default_collate_fn_map``,
``collate_tensor_fn``, ``np_str_obj_array_pattern``)."""

import sys

from fiamma.utils._sibling import require

sys.modules[__name__] = require("fiamma.data._collate", "fiamma-data", __name__)
