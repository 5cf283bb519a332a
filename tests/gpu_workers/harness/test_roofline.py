from gpu_workers.harness.judge.protocol import FP32_STRICT, LOOSE
from gpu_workers.harness.judge.roofline import Peaks, floor_ms

H100ISH = Peaks(device="gpu", bandwidth_gbs=3000.0, fp32_tflops=50.0, tensor_tflops=750.0)


def test_memory_bound_floor_is_bytes_over_bandwidth():
    assert abs(floor_ms(0, 3_000_000_000, H100ISH, LOOSE) - 1.0) < 1e-9


def test_the_protocol_decides_which_flop_rate_bounds_matmul():
    flops = 2 * 8192**3
    assert floor_ms(flops, 0, H100ISH, FP32_STRICT) > 10 * floor_ms(flops, 0, H100ISH, LOOSE)
