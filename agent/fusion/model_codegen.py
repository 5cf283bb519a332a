"""The torch side of a FusionProgram: kernels/fused_binding.cpp and model_new.py.

The binding is one function, `kernel_ext.fused_forward(tensors..., launch...)`: it checks every
tensor against the IR (device, float32, shape, contiguity: the gate forbids `.contiguous()`, so
a strided input is an error with a clear message, never a silent copy), allocates intermediate
and output buffers with torch::empty, runs the kernels in order (on the current CUDA stream) and
returns the outputs, reshaped with views where the IR says so.

model_new.py registers every IR parameter and buffer under its state_dict key (nested modules
for dotted names) so the verifier's state_dict copy fills them, and keeps every kernel's launch
configuration in a module-level LAUNCH dict.
"""

from __future__ import annotations

import keyword
import re

from agent.fusion.ir import Graph
from agent.fusion.plan import Plan
from agent.fusion.program import KernelSource, Param

FUNCTION = "fused_forward"
SCALAR = "scalar"  # tensor_args' dtype of a Python number input, passed as a double
TORCH_TYPES = {"float32": "torch::kFloat32", "int64": "torch::kInt64", "bool": "torch::kBool"}
# Buffer dtypes registered as they are (a name from the IR becomes code only from this list).
OTHER_BUFFER_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8", "bool", "float64"})


def c_identifier(text: str) -> str:
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else f"_{name}"


def buffer_names(graph: Graph, plan: Plan) -> dict[tuple[str, str], str]:
    """C names of every buffer: in_<input>, p_<param>, t_<node> (unique, valid identifiers)."""
    names: dict[tuple[str, str], str] = {}
    used: set[str] = set()

    def unique(base: str) -> str:
        name, k = base, 1
        while name in used:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        return name

    for t in graph.inputs:
        names[("input", t.name)] = unique("in_" + c_identifier(t.name))
    for t in graph.params:
        names[("param", t.name)] = unique("p_" + c_identifier(t.name))
    for n in graph.nodes:
        names[("node", n.name)] = unique("t_" + c_identifier(n.name))
    return names


def python_names(graph: Graph) -> dict[str, str]:
    """forward()'s argument name for every graph input."""
    out: dict[str, str] = {}
    used = {"self"}
    for t in graph.inputs:
        base = t.name if t.name.isidentifier() and not keyword.iskeyword(t.name) else "x"
        name, k = base, 1
        while name in used:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        out[t.name] = name
    return out


def _shape(shape) -> str:
    return "{" + ", ".join(str(d) for d in shape) + "}"


def _launch_args(sources: list[KernelSource]) -> list[tuple[str, str, int]]:
    """(kernel, parameter, default) in the order fused_forward takes them."""
    return [(s.name, key, value) for s in sources for key, value in s.launch.items()]


def _prototype(s: KernelSource, target: str) -> str:
    # a GEMM of a tensor with itself (v @ v, x.T @ x) passes one buffer as both operands
    names = [p.buffer if p.buffer not in [q.buffer for q in s.params[:i]] else f"{p.buffer}_{i}"
             for i, p in enumerate(s.params)]  # fmt: skip
    ptrs = [
        Param(name, p.role, p.dtype).declaration(restrict=False)
        for p, name in zip(s.params, names, strict=True)
    ]
    knobs = [f"{'int' if target == 'cuda' else 'int64_t'} {k}" for k in s.launch]
    if target == "cuda":
        args = ", ".join([*ptrs, *knobs, "cudaStream_t stream"])
        return f'extern "C" const char* {s.launcher}({args});'
    return f'extern "C" void {s.launcher}({", ".join(ptrs + knobs)});'


def binding_source(
    graph: Graph,
    plan: Plan,
    names: dict[tuple[str, str], str],
    sources: list[KernelSource],
    target: str,
    work_buffers: dict[str, int],
) -> str:
    """kernels/fused_binding.cpp. `work_buffers`: extra scratch buffers (name -> elements)."""
    cuda = target == "cuda"
    passed = tensor_args(graph, plan, names, sources)
    launch = _launch_args(sources)
    first = next(c for c, _, _, dtype in passed if dtype != SCALAR)
    device_check = "t.is_cuda()" if cuda else "t.device().is_cpu()"
    device_word = "CUDA" if cuda else "CPU"
    lines = [
        f"std::vector<torch::Tensor> {FUNCTION}(",
        ",\n".join(
            [
                f"    {'double' if dtype == SCALAR else 'torch::Tensor'} {c}"
                for c, _, _, dtype in passed
            ]
            + [f"    int64_t {k}_{p}" for k, p, _ in launch]
        )
        + ") {",
    ]
    add = lines.append
    for c, what, shape, dtype in passed:
        if dtype != SCALAR:
            add(f'  ka_expect({c}, "{what}", {TORCH_TYPES[dtype]}, {_shape(shape)}, {first});')
    if cuda:
        add(f"  const c10::cuda::CUDAGuard guard({first}.device());")
        add("  cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();")
    add(f"  const auto options = {first}.options().dtype(torch::kFloat32);")
    for name in plan.materialised:
        node = graph.node_by_name[name]
        options = "options"
        if node.dtype != "float32":  # argmax / argmin's int64
            options = f"options.dtype({TORCH_TYPES[node.dtype]})"
        add(
            f"  torch::Tensor {names[('node', name)]} = "
            f"torch::empty(std::vector<int64_t>{_shape(node.shape)}, {options});"
        )
    for buf, count in work_buffers.items():
        add(f"  torch::Tensor {buf} = torch::empty(std::vector<int64_t>{{{count}}}, options);")
    for s in sources:
        ptrs = [
            p.buffer if p.role == "scalar" else f"{p.buffer}.data_ptr<{p.c_type}>()"
            for p in s.params
        ]
        knobs = [f"static_cast<{'int' if cuda else 'int64_t'}>({s.name}_{k})" for k in s.launch]
        call = f"{s.launcher}({', '.join(ptrs + knobs + (['stream'] if cuda else []))})"
        if cuda:
            add(f'  ka_launched({call}, "{s.name}");')
        else:
            add(f"  {call};")
    outs = []
    for ref in graph.outputs:
        root = plan.resolve(ref)
        buf = names[("node", root.name)]
        shape = graph.shape_of(ref)
        same = tuple(graph.shape_of(root)) == tuple(shape)
        outs.append(buf if same else f"{buf}.view(std::vector<int64_t>{_shape(shape)})")
    add(f"  return {{{', '.join(outs)}}};")
    add("}")

    pyargs = [f'pybind11::arg("{c}")' for c, _, _, _ in passed]
    pyargs += [f'pybind11::arg("{k}_{p}") = {v}' for k, p, v in launch]
    prototypes = "\n".join(_prototype(s, target) for s in sources)
    pyargs_text = ",\n        ".join(pyargs)
    cuda_includes = (
        "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n" if cuda else ""
    )
    launched = (
        """
void ka_launched(const char* err, const char* kernel) {
  TORCH_CHECK(err == nullptr, "fused_forward: kernel ", kernel, " failed: ", err);
}
"""
        if cuda
        else ""
    )
    return f"""// kernels/fused_binding.cpp, generated by agent.fusion: the kernels' torch side.
// Checks every tensor against the graph's IR, allocates buffers with torch::empty, and runs the
// kernels in order{" on the current CUDA stream" if cuda else ""}. No torch compute here.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
{cuda_includes}
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "../binding_registry.h"

{prototypes}

namespace {{

void ka_expect(const torch::Tensor& t, const char* what, torch::ScalarType dtype,
               std::initializer_list<int64_t> shape, const torch::Tensor& first) {{
  TORCH_CHECK({device_check}, "fused_forward: ", what, " must be a {device_word} tensor, got ",
              t.device());
  TORCH_CHECK(t.device() == first.device(), "fused_forward: ", what, " is on ", t.device(),
              ", the first tensor on ", first.device());
  TORCH_CHECK(t.scalar_type() == dtype, "fused_forward: ", what, " must be ", dtype, ", got ",
              t.scalar_type());
  bool same = t.dim() == static_cast<int64_t>(shape.size());
  int64_t d = 0;
  for (const int64_t size : shape) {{
    if (same && t.size(d) != size) same = false;
    ++d;
  }}
  TORCH_CHECK(same, "fused_forward: ", what, " has shape ", t.sizes(), ", the graph says ",
              c10::IntArrayRef(shape));
  TORCH_CHECK(t.is_contiguous(), "fused_forward: ", what,
              " must be contiguous: the kernels read dense row-major memory (make it "
              "contiguous before the call)");
}}
{launched}
}}  // namespace

{chr(10).join(lines)}

static void bind(pybind11::module_& m) {{
  m.def("{FUNCTION}", &{FUNCTION}, "the fused graph: inputs and parameters in, outputs out",
        {pyargs_text});
}}
REGISTER_BINDING(fused, bind);
"""


def tensor_args(
    graph: Graph, plan: Plan, names: dict[tuple[str, str], str], sources: list[KernelSource]
) -> list[tuple[str, str, tuple[int, ...], str]]:
    """(C name, description, shape, dtype) of what fused_forward takes: the inputs, then the
    parameters and buffers, that some kernel reads; a Python number input's dtype is SCALAR."""
    read = {p.buffer for s in sources for p in s.params if p.role in ("in", "scalar")}
    out = []
    for t in graph.inputs:
        c = names[("input", t.name)]
        if c in read:
            out.append((c, f"input {t.name}", t.shape, SCALAR if t.scalar else t.dtype))
    for t in graph.params:
        c = names[("param", t.name)]
        if c in read:
            out.append((c, f"{t.kind} {t.name}", t.shape, t.dtype))
    return out


def _attribute_path(path: str) -> str | None:
    parts = path.split(".")
    if all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return "self." + path
    return None


def model_new_source(
    graph: Graph,
    plan: Plan,
    names: dict[tuple[str, str], str],
    sources: list[KernelSource],
    launch: dict[str, dict[str, int]],
    docstring: str,
) -> str:
    """model_new.py with the given LAUNCH values."""
    py_names = python_names(graph)
    passed = {c for c, _, _, _ in tensor_args(graph, plan, names, sources)}
    containers: list[str] = []
    for t in graph.params:
        parts = t.name.split(".")
        for k in range(1, len(parts)):
            path = ".".join(parts[:k])
            if path not in containers:
                containers.append(path)
    init = ["        super().__init__()"]
    if containers:
        init.append(f"        for path in {tuple(containers)!r}:")
        init.append('            parent, _, name = path.rpartition(".")')
        init.append("            self.get_submodule(parent).add_module(name, nn.Module())")
    for t in graph.params:
        parent, _, leaf = t.name.rpartition(".")
        owner = "self" if not parent else f"self.get_submodule({parent!r})"
        shape = repr(tuple(t.shape))
        if t.kind == "buffer":  # any dtype: one no kernel reads (num_batches_tracked) is kept
            dtype = f", dtype=torch.{t.dtype}" if t.dtype in OTHER_BUFFER_DTYPES else ""
            init.append(f"        {owner}.register_buffer({leaf!r}, torch.empty({shape}{dtype}))")
        else:
            init.append(
                f"        {owner}.register_parameter({leaf!r}, nn.Parameter(torch.empty({shape})))"
            )
    init.append("        self._launch = (")
    for s in sources:
        for key in s.launch:
            init.append(f"            LAUNCH[{s.name!r}][{key!r}],")
    init.append("        )")

    call_args = []
    for t in graph.inputs:
        if names[("input", t.name)] in passed:
            call_args.append(py_names[t.name])
    for t in graph.params:
        if names[("param", t.name)] in passed:
            attr = _attribute_path(t.name)
            getter = "get_buffer" if t.kind == "buffer" else "get_parameter"
            call_args.append(attr or f"self.{getter}({t.name!r})")
    call_args.append("*self._launch")
    ret = "outs[0]" if len(graph.outputs) == 1 else "tuple(outs)"
    call_text = ",\n            ".join(call_args)
    launch_lines = ["LAUNCH = {"]
    for s in sources:
        values = ", ".join(f"{k!r}: {v}" for k, v in launch[s.name].items())
        launch_lines.append(f"    {s.name!r}: {{{values}}},")
    launch_lines.append("}")
    signature = ", ".join(["self"] + [py_names[t.name] for t in graph.inputs])
    doc = "\n".join(("# " + line).rstrip() for line in docstring.splitlines())
    return f'''"""Generated by agent.fusion (KernelArena's fusion compiler) from the graph's IR."""

import torch
import torch.nn as nn

import kernel_ext

{doc}

# Launch configuration of every kernel, read at construction: tuning rewrites only this dict.
{chr(10).join(launch_lines)}


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
{chr(10).join(init)}

    def forward({signature}):
        outs = kernel_ext.{FUNCTION}(
            {call_text}
        )
        return {ret}
'''
