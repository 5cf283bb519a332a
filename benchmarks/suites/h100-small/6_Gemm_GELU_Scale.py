import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A linear layer (GEMM with bias) followed by GELU and multiplication by a constant.
    """

    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): Input of shape (batch_size, in_features).

        Returns:
            torch.Tensor: Output of shape (batch_size, out_features).
        """
        x = self.gemm(x)
        x = F.gelu(x)
        x = x * self.scaling_factor
        return x


batch_size = 4096
in_features = 4096
out_features = 4096
scaling_factor = 2.0


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
