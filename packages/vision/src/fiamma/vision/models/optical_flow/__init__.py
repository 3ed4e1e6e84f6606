"""fiamma.vision.models.optical_flow: torchvision's RAFT optical-flow models (``raft_large``,
``raft_small``) with their weights enums. A model takes two images ``(N, 3, H, W)`` (H and W
multiples of 8, values in [-1, 1]) and returns the list of flow estimates ``(N, 2, H, W)``, one
per refinement step; the last one is the best.

    >>> import fiamma
    >>> from fiamma.vision.models.optical_flow import raft_small
    >>> m = raft_small(weights=None).eval()
    >>> img = fiamma.zeros(1, 3, 128, 128)
    >>> flows = m(img, img, num_flow_updates=2)
    >>> len(flows), tuple(flows[-1].shape)
    (2, (1, 2, 128, 128))
"""
from fiamma.vision.models.optical_flow.raft import *  # noqa: F401,F403
