import torch
import torch.nn as nn

import kernel_ext  # built from binding.cpp and kernels/ by the compile tool


class ModelNew(nn.Module):
    """Replace this with a model whose forward calls only kernel_ext functions."""

    def __init__(self, *init_inputs):
        super().__init__()

    def forward(self, *inputs):
        raise NotImplementedError("write kernels/ and call them through kernel_ext here")
