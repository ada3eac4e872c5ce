"""Model FLOPs of ResNet-50, counted from its layer shapes. Pure.

The convention (the one torchvision's model table and fvcore use): a forward pass costs the
multiply-accumulates (MACs) of its convolutions and its linear layer; batch norm, ReLU, pooling and
the residual additions are left out (together about 1% more). One MAC is two floating-point operations,
so forward FLOPs = 2 x MACs. A training step costs about three forward passes per sample: the forward
itself, then the gradient with respect to the activations and the one with respect to the weights,
each as many MACs as the forward (the convention of Kaplan et al. 2020, "Scaling Laws for Neural Language
Models", C = 6N per token, and of the PaLM paper's model FLOPs utilisation, Chowdhery et al. 2022,
appendix B).

At 224x224 the count below gives 4,089,184,256 MACs for torchvision's ResNet-50 v1.5, the "4.09
GFLOPS" of torchvision's table (pytorch.org/vision/stable/models/generated/torchvision.models.resnet50.html),
which counts multiply-accumulates; that is 8.18 GFLOPs forward and 24.5 GFLOPs per trained image.
"""

from __future__ import annotations

from dataclasses import dataclass

# ResNet-50's four stages: bottleneck width, blocks, stride of the first block.
_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
_EXPANSION = 4
# Forward, gradient of the activations, gradient of the weights: one forward's MACs each.
TRAINING_PASSES = 3


@dataclass(frozen=True)
class Conv:
    """A 2-D convolution's shape (no groups, square kernel)."""

    in_channels: int
    out_channels: int
    kernel: int
    stride: int = 1
    padding: int = 0

    def out_size(self, size: int) -> int:
        """The output's side for an input of side ``size`` (PyTorch's arithmetic, dilation 1)."""
        return (size + 2 * self.padding - self.kernel) // self.stride + 1

    def macs(self, size: int) -> int:
        """Multiply-accumulates for one image of side ``size``."""
        out = self.out_size(size)
        return out * out * self.out_channels * self.in_channels * self.kernel * self.kernel


def resnet50_forward_macs(image_size: int, *, num_classes: int = 1000, stride_on_3x3: bool = True) -> int:
    """Multiply-accumulates of one ResNet-50 forward pass on a square image of side ``image_size``.

    ``stride_on_3x3``: v1.5 (torchvision's and the payload's layout: a block's stride on its 3x3
    convolution); False is v1 (stride on the first 1x1, tf_cnn_benchmarks' ``resnet50``).
    """
    stem = Conv(3, 64, 7, stride=2, padding=3)
    macs = stem.macs(image_size)
    size = Conv(64, 64, 3, stride=2, padding=1).out_size(stem.out_size(image_size))  # the max pool
    in_channels = 64
    for width, blocks, first_stride in _STAGES:
        out_channels = width * _EXPANSION
        for block in range(blocks):
            stride = first_stride if block == 0 else 1
            reduce = Conv(in_channels, width, 1, stride=1 if stride_on_3x3 else stride)
            spatial = Conv(width, width, 3, stride=stride if stride_on_3x3 else 1, padding=1)
            expand = Conv(width, out_channels, 1)
            inner = reduce.out_size(size)
            macs += reduce.macs(size) + spatial.macs(inner)
            inner = spatial.out_size(inner)
            macs += expand.macs(inner)
            if block == 0:  # the projection shortcut
                macs += Conv(in_channels, out_channels, 1, stride=stride).macs(size)
            size, in_channels = inner, out_channels
    return macs + in_channels * num_classes  # the classifier after global average pooling


def training_flops(forward_macs: int) -> float:
    """FLOPs of one training sample: ``TRAINING_PASSES`` forward passes of 2 FLOPs per MAC."""
    return float(TRAINING_PASSES * 2 * forward_macs)
