import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Applies a ReLU activation elementwise.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): Input tensor of any shape.

        Returns:
            torch.Tensor: max(x, 0), same shape as x.
        """
        return torch.relu(x)


batch_size = 4096
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []  # no parameters
