import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Applies LogSoftmax along one dimension of a 2-D input.
    """

    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): Input of shape (batch_size, dim).

        Returns:
            torch.Tensor: log_softmax of x along self.dim, same shape as x.
        """
        return torch.log_softmax(x, dim=self.dim)


batch_size = 4096
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [1]  # reduce over dim 1, the last dimension
