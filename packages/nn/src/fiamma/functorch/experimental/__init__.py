"""``functorch.experimental``: the control-flow ops PyTorch 2.x tutorials import from here
(:mod:`fiamma.functorch.experimental.control_flow`)."""

from . import control_flow

__all__ = ["control_flow"]
