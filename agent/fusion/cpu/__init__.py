"""The cpu target: each kernel kind's generator (kernels/fused.cpp, C++ with OpenMP), and the
file's assembly. Every loop runs along a row of the element space with the row's operand offsets
hoisted (row_access), so the innermost loop is a `#pragma omp simd`.
"""

from agent.fusion.cpu.arg_reduction import arg_reduction_source
from agent.fusion.cpu.gemm import gemm_source
from agent.fusion.cpu.pointwise import pointwise_source
from agent.fusion.cpu.prelude import fused_cpp as kernel_file
from agent.fusion.cpu.row import row_source
from agent.fusion.cpu.scan import scan_source
from agent.fusion.cpu.windowed import convolution_source, pooling_source

# kernel kind -> generator(plan, kernel, names, allow_tf32) -> KernelSource
GENERATORS = {
    "pointwise": pointwise_source,
    "row_reduction": row_source,
    "axis_reduction": row_source,  # the same row walk, rows `inner` apart
    "scan": scan_source,
    "arg_reduction": arg_reduction_source,
    "pooling": pooling_source,
    "convolution": convolution_source,
    "gemm": gemm_source,
}

__all__ = ["GENERATORS", "kernel_file"]
