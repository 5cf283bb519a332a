import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Attention-style scaled softmax: softmax(x * scale) over the last dimension.
    """

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): Input of shape (batch_size, dim).

        Returns:
            torch.Tensor: Row-wise softmax of x * scale, same shape as x.
        """
        return torch.softmax(x * self.scale, dim=-1)


batch_size = 16384
dim = 4096
scale = 0.125


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [scale]
