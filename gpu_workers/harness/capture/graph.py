"""The Graph IR of docs/fusion.md (`kernelarena.graph/1`): an op's computation graph with shapes,
lowered to the fusion compiler's core ops.

The parent side (`capture`) never imports the problem: a sandboxed child (the `graph` step)
traces it with `torch.fx.symbolic_trace` (or, for a forward whose Python control flow keeps fx
out, TorchDynamo's whole-graph capture on the seeded inputs), propagates shapes on the seeded
inputs (`ShapeProp`) and lowers every node that the outputs depend on (`lower_problem`,
`lower`; the walk is lowering, the op tables ops). A Session captures in its reference runner
instead (the `graph` command), so the process it starts outside the GPU lock serves its judged
steps too. What cannot be lowered is named
in `unsupported`, one string per op: "<op> (<how it was called>): <why>".
"""

from __future__ import annotations

import contextlib
import inspect
import tempfile
from pathlib import Path

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from gpu_workers.harness.capture.lowering import Lowering
from gpu_workers.harness.capture.ops import UNSUPPORTED, dtype_name, is_scalar_input
from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.problem_source import ProblemError, check_source
from gpu_workers.harness.sandbox import launch as sandbox

FORMAT = "kernelarena.graph/1"
# Input dtypes the capture passes on; the planner refuses an int64 or bool input read other than
# as an index (cross-entropy's targets) or a mask (x * mask).
INPUT_DTYPES = ("float32", "int64", "bool")
MAX_MESSAGE_CHARS = 500


def empty_graph(device: str, unsupported: list[str]) -> dict:
    return {
        "format": FORMAT,
        "device": device,
        "inputs": [],
        "params": [],
        "nodes": [],
        "outputs": [],
        "unsupported": list(unsupported),
    }


def capture(
    source: str,
    device: str,
    protocol: Protocol,
    timeout_s: float = 300,
    workdir: Path | None = None,
) -> dict:
    """The problem's Graph IR, captured in the sandbox. A problem that cannot even be loaded
    gives an IR with no nodes and the reason in `unsupported`. With `workdir`, the child runs in
    its `graph/` folder (kept), otherwise in a temporary one."""
    try:
        check_source(source)
    except ProblemError as exc:
        return empty_graph(device, [str(exc)])
    with _directory(workdir) as directory:
        problem_path = Path(directory) / "model.py"
        problem_path.write_text(source)
        request = {
            "problem": str(problem_path),
            "device": device,
            "protocol": protocol.to_request(),
        }
        # The child sees only its folder, which holds the problem.
        result, failure = sandbox.run_step(
            "graph", request, Path(directory), device, timeout_s, view=sandbox.View()
        )
    if failure:
        return empty_graph(device, [failure])
    return result


def _directory(workdir: Path | None):
    if workdir is None:
        return tempfile.TemporaryDirectory(prefix="graph-")
    path = Path(workdir) / "graph"
    path.mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(str(path))


# ---- child side: only ever runs inside the sandbox --------------------------------------------


def capture_in_child(request: dict) -> dict:
    from gpu_workers.harness.runner import problem

    device, protocol = request["device"], Protocol.from_request(request["protocol"])
    problem.reference_precision(protocol)
    module = problem.load_module(Path(request["problem"]), "problem_model")
    model_cls = getattr(module, "Model", None)
    if not isinstance(model_cls, type) or not issubclass(model_cls, nn.Module):
        return empty_graph(device, ["Model must be a subclass of torch.nn.Module"])
    model = problem.build_model(module, device, protocol.init_seed)
    return lower_problem(module, model, device, protocol)


def lower_problem(module, model: nn.Module, device: str, protocol: Protocol) -> dict:
    """A loaded problem's IR: its model lowered on the first public seed's inputs, in a
    sandboxed process (the `graph` step's child, or a Session's reference runner, which then
    serves the judged steps: the model is read, never changed, and TorchDynamo's caches of a
    fallback capture are dropped)."""
    from gpu_workers.harness.runner import problem

    problem.reference_precision(protocol)
    inputs = problem.make_inputs(module, protocol.seeds()[0], device)
    return lower(model, inputs, device)


def lower(model: nn.Module, inputs: list, device: str) -> dict:
    """Traces `model`, propagates shapes on `inputs` and lowers the graph to the IR."""
    graph = empty_graph(device, [])
    graph["params"], unsupported = _params(model)
    graph["unsupported"] = unsupported
    traced, failure = _trace(model, inputs)
    if traced is None:
        graph["inputs"] = _inputs(_forward_names(model), inputs, unsupported)
        unsupported.append(failure)
        return graph
    names = [str(n.target).lstrip("*") for n in traced.graph.nodes if n.op == "placeholder"]
    graph["inputs"] = _inputs(names, inputs, unsupported)
    recorder = _Recorder(traced)
    try:
        with torch.no_grad():
            recorder.propagate(*inputs)
    except Exception as exc:  # noqa: BLE001 - the user's forward may raise anything
        where = recorder.current.name if recorder.current is not None else "forward"
        while exc.__cause__ is not None:  # ShapeProp wraps the op's own error
            exc = exc.__cause__
        unsupported.append(f"shape propagation failed at {where}: {_message(exc)}")
        return graph
    lowering = Lowering(traced, model, recorder.values, len(inputs), unsupported)
    graph["nodes"], graph["outputs"] = lowering.run()
    return graph


class _BufferTracer(fx.Tracer):
    """symbolic_trace's tracer, with buffers read as get_attr nodes like parameters: fx would
    run an op on a buffer while tracing and keep its result as a constant outside the
    state_dict (minGPT's `self.bias == 0` causal mask), which ModelNew could not be given."""

    proxy_buffer_attributes = True


def _trace(model: nn.Module, inputs: list) -> tuple[fx.GraphModule | None, str]:
    """The forward as an fx graph of torch-level calls, or why not. symbolic_trace
    first (it keeps module calls, and runs nothing); a forward it cannot follow (Python that
    branches on a shape, a size turned into a Python number) is traced again by TorchDynamo on
    the seeded inputs, which specialises such Python to these shapes. Only when both fail is
    the forward refused, with symbolic_trace's reason."""
    try:
        return fx.GraphModule(model, _BufferTracer().trace(model), type(model).__name__), ""
    except Exception as exc:  # noqa: BLE001 - the tracer raises many kinds; all mean "cannot"
        first = f"forward cannot be traced by torch.fx: {_message(exc)}"
    try:
        return _dynamo_trace(model, inputs), ""
    except Exception as exc:  # noqa: BLE001 - a graph break, an unsupported construct
        return None, f"{first}; nor by TorchDynamo: {_message(exc)}"


def _dynamo_trace(model: nn.Module, inputs: list) -> fx.GraphModule:
    """TorchDynamo's whole-graph capture (no graph break allowed), at the level of torch calls:
    modules are inlined into their functional calls, and each parameter or buffer is read by a
    get_attr renamed back to its state_dict key (the IR names params by it)."""
    import torch._dynamo

    # Only this capture fills Dynamo's caches, so only it resets them, before and after (a
    # reset on a CUDA build imports Inductor's cudagraph trees: 3-4 s a Session's graph step
    # paid under the GPU lock for every problem, even one symbolic_trace had captured).
    torch._dynamo.reset()
    try:
        traced, _guards = torch._dynamo.export(model)(*inputs)
    finally:
        torch._dynamo.reset()
    keys = {id(t): key for key, t in model.state_dict(keep_vars=True).items()}
    names = iter(_padded(_forward_names(model), len(inputs)))
    for node in traced.graph.nodes:
        if node.op == "placeholder":  # arg0, arg1, ...: the forward's own names, as fx's
            node.target = next(names)
        elif node.op == "get_attr":
            key = keys.get(id(getattr(traced, node.target)))
            if key is not None:
                _alias(traced, key, getattr(traced, node.target))
                node.target = key
    traced.recompile()
    return traced


def _alias(module: nn.Module, dotted: str, value: torch.Tensor) -> None:
    """Makes `value` reachable at `dotted` ("fc.weight") under `module`, as fx's get_attr reads."""
    *path, leaf = dotted.split(".")
    for part in path:
        if not hasattr(module, part):
            module.add_module(part, nn.Module())
        module = getattr(module, part)
    if isinstance(value, nn.Parameter):
        module.register_parameter(leaf, value)
    else:
        module.register_buffer(leaf, value)


class _Recorder(ShapeProp):
    """ShapeProp that also keeps every non-tensor result (sizes, shapes, Python numbers), so
    that `x.size(-1)` or `x.shape[1] * 2` can be baked in as constants."""

    def __init__(self, module: fx.GraphModule):
        super().__init__(module)
        self.values: dict[fx.Node, object] = {}
        self.current: fx.Node | None = None

    def run_node(self, n: fx.Node):
        self.current = n
        result = super().run_node(n)
        if not _holds_tensor(result):
            self.values[n] = result
        return result


def _holds_tensor(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, list | tuple):
        return any(_holds_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    return False


def _params(model: nn.Module) -> tuple[list[dict], list[str]]:
    params, unsupported = [], []
    for key, tensor in model.state_dict(keep_vars=True).items():
        kind = "parameter" if isinstance(tensor, nn.Parameter) else "buffer"
        dtype = dtype_name(tensor.dtype)
        params.append({"name": key, "shape": list(tensor.shape), "dtype": dtype, "kind": kind})
        # A buffer of another dtype is fine while no kernel reads it (BatchNorm's int64
        # num_batches_tracked); the planner refuses one that is read.
        if dtype != "float32" and kind == "parameter":
            unsupported.append(f"{kind} {key}: {dtype} tensors are {UNSUPPORTED} (float32 only)")
    return params, unsupported


def _padded(names: list[str], count: int) -> list[str]:
    """`names`, then input<i> for the inputs a *args takes."""
    return names + [f"input{i}" for i in range(len(names), count)]


def _forward_names(model: nn.Module) -> list[str]:
    try:
        return list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return []


def _inputs(names: list[str], inputs: list, unsupported: list[str]) -> list[dict]:
    names = _padded(names, len(inputs))
    pairs = zip(names, inputs, strict=False)  # names may outnumber inputs (defaults)
    return [_input_entry(name, value, unsupported) for name, value in pairs]


def _input_entry(name: str, value, unsupported: list[str]) -> dict:
    if is_scalar_input(value):  # A * s: passed to the kernels by value
        return {"name": name, "shape": [], "dtype": "float32", "scalar": True}
    if not isinstance(value, torch.Tensor):
        kind = type(value).__name__
        unsupported.append(
            f"input {name}: a {kind}, not a tensor or a number; only those are supported"
        )
        return {"name": name, "shape": None, "dtype": kind}
    dtype = dtype_name(value.dtype)
    if dtype not in INPUT_DTYPES:
        unsupported.append(
            f"input {name}: {dtype} tensors are {UNSUPPORTED} (float32, and int64 or bool where "
            "they index or mask)"
        )
    return {"name": name, "shape": list(value.shape), "dtype": dtype}


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + " [...]"
    return f"{type(exc).__name__}: {text}"
