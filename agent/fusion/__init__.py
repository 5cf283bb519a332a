"""The fusion compiler: Graph IR (docs/fusion.md) in, fused CUDA or OpenMP C++ kernels out.

Pure Python, no torch: ir (parse + broadcasting), plan (partition into kernels), body (each
kernel's expression DAG), expressions (the op table), the cuda and cpu packages (kernel sources,
one module per kernel kind), model_codegen (binding and model_new.py), compiler (compile_graph);
backend (the agent policy that drives them through the tools).
"""

from agent.fusion.backend import FusionBackend
from agent.fusion.compiler import compile_graph
from agent.fusion.program import FusionProgram

__all__ = ["FusionBackend", "FusionProgram", "compile_graph"]
