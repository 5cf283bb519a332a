import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """An MLP up-projection: Linear(4096 -> 8192) then GELU on (8192, 4096) fp32 tokens."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 8192]
