"""First and second derivatives of the convolution ops against finite differences (float64):
plain and transposed convolutions with stride, padding, dilation, groups and output_padding,
1-D to 3-D, the weight-gradient op itself, and im2col/col2im."""

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "convolution"),
                                reason="core's convolution ops are not available")


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, 1, 1, 2), ((1, 2), (0, 1), (2, 1), 2)])
def test_conv2d(stride, padding, dilation, groups):
    rng = np.random.default_rng(0)
    x = rand(2, 4, 6, 5, rng=rng)
    w = rand(3 * groups // groups * 2, 4 // groups, 3, 2, rng=rng)
    b = rand(6, rng=rng)
    check(lambda x, w, b: fiamma.conv2d(x, w, b, stride, padding, dilation, groups), x, w, b)


def test_conv1d_3d_noncontig_and_same():
    rng = np.random.default_rng(1)
    check(lambda x, w: fiamma.conv1d(x, w, None, 2, 1), noncontig(2, 3, 7, rng=rng),
          rand(2, 3, 3, rng=rng))
    check(lambda x, w: fiamma.conv1d(x, w, padding="same", dilation=1), rand(1, 2, 6, rng=rng),
          rand(3, 2, 4, rng=rng))
    check(lambda x, w, b: fiamma.conv3d(x, w, b, (1, 2, 1), 1), rand(1, 2, 3, 4, 3, rng=rng),
          rand(2, 2, 2, 2, 2, rng=rng), rand(2, rng=rng))


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 0, 2, 1, 2), (1, 1, 1, 2, 1), (2, 0, 1, 2, 2)])
def test_conv_transpose2d(stride, padding, output_padding, dilation, groups):
    rng = np.random.default_rng(2)
    x = rand(2, 4, 3, 4, rng=rng)
    w = rand(4, 6 // groups, 2, 3, rng=rng)
    b = rand(6, rng=rng)
    check(lambda x, w, b: fiamma.conv_transpose2d(x, w, b, stride, padding, output_padding,
                                                  groups, dilation), x, w, b)


def test_conv_transpose1d_3d():
    rng = np.random.default_rng(3)
    check(lambda x, w: fiamma.conv_transpose1d(x, w, None, 2, 1, 1), rand(2, 3, 4, rng=rng),
          rand(3, 2, 3, rng=rng))
    check(lambda x, w: fiamma.conv_transpose3d(x, w, None, 2, 0, 1),
          rand(1, 2, 2, 2, 2, rng=rng), rand(2, 1, 2, 2, 2, rng=rng))


def test_backward_weight_op():
    rng = np.random.default_rng(4)
    x, gy = rand(2, 4, 5, 5, rng=rng), rand(2, 6, 3, 2, rng=rng)
    check(lambda x, gy: fiamma.convolution_backward_weight(x, gy, (6, 2, 2, 3), (2, 2), (1, 0),
                                                           (1, 1), 2), x, gy)


def test_im2col_col2im():
    rng = np.random.default_rng(5)
    check(lambda x: fiamma.im2col(x, (2, 3), (1, 1), (1, 0), (2, 1)), rand(2, 2, 4, 5, rng=rng))
    check(lambda c: fiamma.col2im(c, (4, 5), (2, 3), (1, 1), (1, 0), (2, 1)),
          rand(2, 12, 9, rng=rng))
