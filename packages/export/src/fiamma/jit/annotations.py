"""``torch.jit.annotations``: the typing names TorchScript-era code imports from it.

Old model code writes ``from torch.jit.annotations import List, Tuple`` for its type
comments; these are :mod:`typing`'s objects (as in PyTorch). ``BroadcastingList1/2/3``
(TorchScript's "an int or a list of N ints") are plain ``typing.List`` for eager code.
"""

from typing import Any, Dict, List, Optional, Tuple, Union

__all__ = ["Any", "Dict", "List", "Optional", "Tuple", "Union", "BroadcastingList1",
           "BroadcastingList2", "BroadcastingList3"]

BroadcastingList1 = List
BroadcastingList2 = List
BroadcastingList3 = List
