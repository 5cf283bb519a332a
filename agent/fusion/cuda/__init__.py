"""The cuda target: each kernel kind's generator (kernels/fused.cu), and the file's assembly.

Every shape is a compile-time constant (the binding checks the tensors against the IR's shapes),
so broadcast index arithmetic is division and modulo by constants, which nvcc turns into
multiply-shift sequences; indices are 32-bit unsigned whenever the element count allows. Launch
knobs are launcher arguments.
"""

from agent.fusion.cuda.arg_reduction import arg_reduction_source
from agent.fusion.cuda.axis import axis_source
from agent.fusion.cuda.gemm import gemm_source
from agent.fusion.cuda.pointwise import pointwise_source
from agent.fusion.cuda.prelude import fused_cu as kernel_file
from agent.fusion.cuda.row import row_source
from agent.fusion.cuda.scan import scan_source
from agent.fusion.cuda.windowed import convolution_source, pooling_source

# kernel kind -> generator(plan, kernel, names, allow_tf32) -> KernelSource
GENERATORS = {
    "pointwise": pointwise_source,
    "row_reduction": row_source,
    "axis_reduction": axis_source,
    "scan": scan_source,
    "arg_reduction": arg_reduction_source,
    "pooling": pooling_source,
    "convolution": convolution_source,
    "gemm": gemm_source,
}

__all__ = ["GENERATORS", "kernel_file"]
