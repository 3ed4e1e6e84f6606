"""fiamma.vision.ops: building blocks shared by the vision models and detection operators
(torchvision.ops' names): box operations and NMS, detection losses, and the model layers.

    >>> from fiamma.vision.ops import Conv2dNormActivation, SqueezeExcitation, StochasticDepth
    >>> from fiamma.vision.ops import nms, box_iou, sigmoid_focal_loss
"""
from fiamma.vision.ops.boxes import *  # noqa: F401,F403
from fiamma.vision.ops.boxes import __all__ as _boxes_all
from fiamma.vision.ops.deform_conv import *  # noqa: F401,F403
from fiamma.vision.ops.deform_conv import __all__ as _dc_all
from fiamma.vision.ops.drop_block import *  # noqa: F401,F403
from fiamma.vision.ops.drop_block import __all__ as _db_all
from fiamma.vision.ops.feature_pyramid_network import *  # noqa: F401,F403
from fiamma.vision.ops.feature_pyramid_network import __all__ as _fpn_all
from fiamma.vision.ops.losses import *  # noqa: F401,F403
from fiamma.vision.ops.losses import __all__ as _losses_all
from fiamma.vision.ops.misc import *  # noqa: F401,F403
from fiamma.vision.ops.misc import __all__ as _misc_all
from fiamma.vision.ops.roi_align import *  # noqa: F401,F403
from fiamma.vision.ops.roi_align import __all__ as _roi_all
from fiamma.vision.ops.roi_pool import *  # noqa: F401,F403
from fiamma.vision.ops.roi_pool import __all__ as _roipool_all
from fiamma.vision.ops.stochastic_depth import *  # noqa: F401,F403
from fiamma.vision.ops.stochastic_depth import __all__ as _sd_all

__all__ = (list(_misc_all) + list(_sd_all) + list(_boxes_all) + list(_losses_all)
           + list(_roi_all) + list(_roipool_all) + list(_fpn_all) + list(_db_all) + list(_dc_all))
