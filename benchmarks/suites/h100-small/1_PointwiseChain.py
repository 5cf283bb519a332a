import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Per-channel affine transform, GELU, then a constant scale:
    y = gelu(x * weight + bias) * scale, with weight and bias of shape (channels,).
    """

    def __init__(self, channels: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): Input of shape (rows, channels).

        Returns:
            torch.Tensor: Output of the same shape as x.
        """
        return F.gelu(x * self.weight + self.bias) * self.scale


rows = 8192
channels = 8192
scale = 0.5


def get_inputs():
    x = torch.randn(rows, channels)
    return [x]


def get_init_inputs():
    return [channels, scale]
