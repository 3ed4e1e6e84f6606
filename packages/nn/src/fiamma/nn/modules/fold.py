"""Fold and Unfold: sliding local blocks to columns and back (PyTorch's arguments)."""

from fiamma.nn import functional as F
from fiamma.nn.modules.module import Module

__all__ = ["Fold", "Unfold"]


class Fold(Module):
    """Sum columns (N, C * prod(kernel_size), L) into an image (N, C, *output_size).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.Fold((3, 3), 2)(fiamma.ones(1, 4, 4)).tolist()[0][0][1]
    [2.0, 4.0, 2.0]
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, "
                "padding={padding}, stride={stride}".format(**self.__dict__))


class Unfold(Module):
    """Sliding local blocks of (N, C, H, W) as columns (N, C * prod(kernel_size), L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (kernel_size, dilation,
                                                                      padding, stride)

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return ("kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))
