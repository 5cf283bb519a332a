import pytest

from gpu_workers.harness.judge.source_gate import check_cpp, check_python


def codes(violations):
    return {v.code for v in violations}


def test_a_clean_model_new_passes():
    source = (
        "import torch\nimport kernel_ext\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        self.n = 1\n        return kernel_ext.op(x)\n"
    )
    assert check_python(source) == []


@pytest.mark.parametrize(
    "source, code",
    [
        ("import threading", "async_work"),
        ("from concurrent.futures import ThreadPoolExecutor", "async_work"),
        ("import torch\ns = torch.cuda.Stream()", "async_work"),
        ("import time\ntime.perf_counter = lambda: 0.0", "forbidden_source"),
        ("import torch\ntorch.cuda.Event.elapsed_time = None", "forbidden_source"),
        ("setattr(__import__('time'), 'time', None)", "forbidden_source"),
        ("import torch\nf = torch.compile(lambda x: x)", "torch_compute"),
        ("import torch\ny = torch.ops.aten.relu", "torch_compute"),
        ("from torch.utils._python_dispatch import _get_current_dispatch_mode", "forbidden_source"),
    ],
)
def test_python_cheats_are_caught(source, code):
    assert code in codes(check_python(source))


def test_a_clean_binding_passes():
    source = """
    #include <ATen/cuda/CUDAContext.h>
    torch::Tensor f(torch::Tensor x) {
      TORCH_CHECK(x.scalar_type() == torch::kFloat32, "fp32");  // torch::relu( in a comment
      auto y = torch::empty_like(x);
      launch(x.data_ptr<float>(), y.data_ptr<float>(), at::cuda::getCurrentCUDAStream());
      return y;
    }"""
    assert check_cpp(source, "kernels/op_binding.cpp") == []


@pytest.mark.parametrize(
    "line, code",
    [
        ("auto y = torch::relu(x);", "torch_compute"),
        ("auto y = at::matmul(a, b);", "torch_compute"),
        ("auto y = torch::nn::functional::gelu(x);", "torch_compute"),
        ("std::thread t(work); t.detach();", "async_work"),
        ("cudaStream_t s; cudaStreamCreate(&s);", "async_work"),
        ("auto s = at::cuda::getStreamFromPool();", "async_work"),
    ],
)
def test_cpp_cheats_are_caught_with_file_and_line(line, code):
    found = check_cpp("// header\n" + line, "kernels/op_binding.cpp")
    assert code in codes(found)
    assert all("kernels/op_binding.cpp:2" in v.detail for v in found)
