import torch
import torch.nn as nn


class Model(nn.Module):
    """
    RMS normalisation written out with elementary ops, the way LLaMA-style code does:
    y = x * rsqrt(mean(x^2, last dim) + eps) * weight.
    """

    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size) + 0.1 * torch.randn(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): Input of shape (batch_size, hidden_size).

        Returns:
            torch.Tensor: Normalised and scaled output, same shape as x.
        """
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


batch_size = 16384
hidden_size = 4096
eps = 1e-6


def get_inputs():
    x = torch.randn(batch_size, hidden_size)
    return [x]


def get_init_inputs():
    return [hidden_size, eps]
