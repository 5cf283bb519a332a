"""Hand-written Graph IR (docs/fusion.md) for the patterns the fusion compiler plans, each with a
KernelBench-format problem computing the same thing (norm_layers' and losses' IR is the capture's
lowering of their problem, since those calls lower to many nodes). Sizes are parameters: small
ones for the cpu target's tests, large ones for benchmarks on a GPU."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    name: str
    ir: dict
    problem: str
    kinds: tuple[str, ...]  # the kernel kinds the planner should make, in order
    nodes: tuple[tuple[str, ...], ...]  # the IR nodes each kernel covers


def inp(name: str) -> dict:
    return {"input": name}


def par(name: str) -> dict:
    return {"param": name}


def nd(name: str) -> dict:
    return {"node": name}


def const(value: float) -> dict:
    return {"const": value}


def node(name: str, op: str, args: list, out_shape: list[int], **attrs) -> dict:
    return {
        "name": name,
        "op": op,
        "args": args,
        "attrs": attrs,
        "shape": list(out_shape),
        "dtype": "float32",
    }


def tensor(name: str, shape: list[int], kind: str | None = None) -> dict:
    spec = {"name": name, "shape": list(shape), "dtype": "float32"}
    if kind:
        spec["kind"] = kind
    return spec


def graph(inputs, params, nodes, outputs, device="cpu", unsupported=()) -> dict:
    return {
        "format": "kernelarena.graph/1",
        "device": device,
        "inputs": inputs,
        "params": params,
        "nodes": nodes,
        "outputs": [nd(o) for o in outputs],
        "unsupported": list(unsupported),
    }


HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def _inputs(*shapes: tuple[int, ...], scale: float = 1.0) -> str:
    factor = f" * {scale}" if scale != 1.0 else ""
    items = ", ".join(f"torch.randn{tuple(s)!r}{factor}" for s in shapes)
    return f"\n\ndef get_inputs():\n    return [{items}]\n"


def pointwise_gelu(rows: int = 64, cols: int = 256) -> Case:
    shape = [rows, cols]
    ir = graph(
        [tensor("x", shape)],
        [tensor("scale", [cols], "parameter")],
        [
            node("mul", "mul", [inp("x"), par("scale")], shape),
            node("add", "add", [nd("mul"), const(0.5)], shape, alpha=1),
            node("gelu", "gelu", [nd("add")], shape, approximate="none"),
        ],
        ["gelu"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """gelu(x * scale + 0.5) with a per-channel scale."""

    def __init__(self, channels):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.shift = 0.5

    def forward(self, x):
        return F.gelu(x * self.scale + self.shift)
'''
        + _inputs((rows, cols))
        + f"\n\ndef get_init_inputs():\n    return [{cols}]\n"
    )
    return Case("pointwise_gelu", ir, problem, ("pointwise",), (("mul", "add", "gelu"),))


def scaled_softmax(rows: int = 64, cols: int = 256) -> Case:
    shape = [rows, cols]
    ir = graph(
        [tensor("x", shape)],
        [],
        [
            node("mul", "mul", [inp("x"), const(0.125)], shape),
            node("softmax", "softmax", [nd("mul")], shape, dim=1),
        ],
        ["softmax"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """softmax(x * 0.125) over the last dim."""

    def __init__(self):
        super().__init__()
        self.scale = 0.125

    def forward(self, x):
        return torch.softmax(x * self.scale, dim=-1)
'''
        + _inputs((rows, cols), scale=4.0)
        + "\n\ndef get_init_inputs():\n    return []\n"
    )
    return Case("scaled_softmax", ir, problem, ("row_reduction",), (("mul", "softmax"),))


def residual_layer_norm(rows: int = 64, cols: int = 256) -> Case:
    shape = [rows, cols]
    ir = graph(
        [tensor("x", shape), tensor("residual", shape)],
        [tensor("norm.weight", [cols], "parameter"), tensor("norm.bias", [cols], "parameter")],
        [
            node("add", "add", [inp("x"), inp("residual")], shape, alpha=1),
            node(
                "norm",
                "layer_norm",
                [nd("add"), par("norm.weight"), par("norm.bias")],
                shape,
                normalized_shape=[cols],
                eps=1e-5,
            ),
        ],
        ["norm"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """layer_norm(x + residual)."""

    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.normal_()
            self.norm.bias.normal_()

    def forward(self, x, residual):
        return self.norm(x + residual)
'''
        + _inputs((rows, cols), (rows, cols))
        + f"\n\ndef get_init_inputs():\n    return [{cols}]\n"
    )
    return Case("residual_layer_norm", ir, problem, ("row_reduction",), (("add", "norm"),))


def rms_norm_by_hand(rows: int = 64, cols: int = 256) -> Case:
    shape, row = [rows, cols], [rows, 1]
    ir = graph(
        [tensor("x", shape)],
        [tensor("weight", [cols], "parameter")],
        [
            node("pow", "pow", [inp("x"), const(2)], shape),
            node("mean", "mean", [nd("pow")], row, dim=[1], keepdim=True),
            node("add", "add", [nd("mean"), const(1e-6)], row, alpha=1),
            node("rsqrt", "rsqrt", [nd("add")], row),
            node("mul", "mul", [inp("x"), nd("rsqrt")], shape),
            node("mul_1", "mul", [nd("mul"), par("weight")], shape),
        ],
        ["mul_1"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight, written out op by op."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.eps = 1e-6

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
'''
        + _inputs((rows, cols))
        + f"\n\ndef get_init_inputs():\n    return [{cols}]\n"
    )
    nodes = ("pow", "mean", "add", "rsqrt", "mul", "mul_1")
    return Case("rms_norm_by_hand", ir, problem, ("row_reduction",), (nodes,))


def linear_bias_relu(rows: int = 64, k: int = 128, n: int = 256) -> Case:
    ir = graph(
        [tensor("x", [rows, k])],
        [tensor("fc.weight", [n, k], "parameter"), tensor("fc.bias", [n], "parameter")],
        [
            node("fc", "linear", [inp("x"), par("fc.weight"), par("fc.bias")], [rows, n]),
            node("relu", "relu", [nd("fc")], [rows, n]),
        ],
        ["relu"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """relu(fc(x))."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))
'''
        + _inputs((rows, k))
        + f"\n\ndef get_init_inputs():\n    return [{k}, {n}]\n"
    )
    return Case("linear_bias_relu", ir, problem, ("gemm",), (("fc", "relu"),))


def row_sum_keepdim(rows: int = 64, cols: int = 256) -> Case:
    ir = graph(
        [tensor("x", [rows, cols])],
        [],
        [node("sum", "sum", [inp("x")], [rows, 1], dim=[1], keepdim=True)],
        ["sum"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """x.sum(-1, keepdim=True)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=-1, keepdim=True)
'''
        + _inputs((rows, cols))
        + "\n\ndef get_init_inputs():\n    return []\n"
    )
    return Case("row_sum_keepdim", ir, problem, ("row_reduction",), (("sum",),))


# ---- beyond the six required patterns ----------------------------------------------------------


def softmax_by_hand(a: int = 32, b: int = 3, cols: int = 40) -> Case:
    full, row = [a, b, cols], [a, b, 1]
    ir = graph(
        [tensor("x", full)],
        [],
        [
            node("amax", "amax", [inp("x")], row, dim=[2], keepdim=True),
            node("sub", "sub", [inp("x"), nd("amax")], full, alpha=1),
            node("exp", "exp", [nd("sub")], full),
            node("sum", "sum", [nd("exp")], row, dim=[2], keepdim=True),
            node("div", "div", [nd("exp"), nd("sum")], full),
            node("view", "reshape", [nd("sum")], [a, b], shape=[a, b]),
        ],
        ["div", "view"],
    )
    problem = (
        HEADER
        + f'''class Model(nn.Module):
    """softmax written op by op, and its row sums as a second output."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        s = e.sum(dim=-1, keepdim=True)
        return e / s, s.view({a}, {b})
'''
        + _inputs((a, b, cols))
        + "\n\ndef get_init_inputs():\n    return []\n"
    )
    nodes = ("amax", "sub", "exp", "sum", "div", "view")
    return Case("softmax_by_hand_two_outputs", ir, problem, ("row_reduction",), (nodes,))


def broadcast_zoo(a: int = 8, b: int = 6, c: int = 10) -> Case:
    full = [a, b, c]
    ir = graph(
        [tensor("x", full), tensor("y", [a, 1, c]), tensor("z", [b, 1])],
        [tensor("gain", [], "buffer")],
        [
            node("sub", "sub", [inp("x"), inp("y")], full, alpha=1),
            node("mul", "mul", [nd("sub"), inp("z")], full),
            node("div", "div", [nd("mul"), par("gain")], full),
            node("clamp", "clamp", [nd("div")], full, min=-2.0, max=None),
            node("lrelu", "leaky_relu", [nd("clamp")], full, negative_slope=0.1),
            node("sig", "sigmoid", [nd("lrelu")], full),
            node("tanh_gelu", "gelu", [nd("lrelu")], full, approximate="tanh"),
            node("out", "maximum", [nd("sig"), nd("tanh_gelu")], full),
        ],
        ["out"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """Broadcasts along inner, middle and all dims, then a chain of activations."""

    def __init__(self):
        super().__init__()
        self.register_buffer("gain", torch.tensor(1.5))

    def forward(self, x, y, z):
        v = F.leaky_relu(torch.clamp((x - y) * z / self.gain, min=-2.0), 0.1)
        return torch.maximum(torch.sigmoid(v), F.gelu(v, approximate="tanh"))
'''
        + _inputs((a, b, c), (a, 1, c), (b, 1))
        + "\n\ndef get_init_inputs():\n    return []\n"
    )
    nodes = ("sub", "mul", "div", "clamp", "lrelu", "sig", "tanh_gelu", "out")
    return Case("broadcast_zoo", ir, problem, ("pointwise",), (nodes,))


def activation_zoo(rows: int = 48, cols: int = 200) -> Case:
    """Every parameterless activation KernelBench's levels 1 and 2 call, chained, on inputs wide
    enough (scale 4) to reach each one's branches and saturated tails."""
    shape = [rows, cols]
    chain = [
        ("selu", {}), ("hardsigmoid", {}), ("hardswish", {}), ("mish", {}), ("softsign", {}),
        ("logsigmoid", {}), ("celu", {"alpha": 0.5}),
    ]  # fmt: skip
    nodes, previous, names = [], inp("x"), []
    for index, (op, attrs) in enumerate(chain):
        name = f"{op}_{index}"
        # each activation reads the input plus the last one's output, so none sees only (0, 1)
        nodes.append(node(f"sum_{index}", "add", [inp("x"), previous], shape, alpha=1))
        nodes.append(node(name, op, [nd(f"sum_{index}")], shape, **attrs))
        previous = nd(name)
        names += [f"sum_{index}", name]
    ir = graph([tensor("x", shape)], [], nodes, [names[-1]])
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """A chain of activations, each over the input plus the last one's output."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x
        for act in (F.selu, F.hardsigmoid, F.hardswish, F.mish, F.softsign, F.logsigmoid):
            y = act(x + y)
        return F.celu(x + y, 0.5)
'''
        + _inputs((rows, cols), scale=4.0)
        + "\n\ndef get_init_inputs():\n    return []\n"
    )
    return Case("activation_zoo", ir, problem, ("pointwise",), (tuple(names),))


def bmm_log_softmax(batch: int = 4, m: int = 16, k: int = 24, n: int = 20) -> Case:
    out = [batch, m, n]
    ir = graph(
        [tensor("a", [batch, m, k]), tensor("b", [batch, k, n])],
        [],
        [
            node("bmm", "bmm", [inp("a"), inp("b")], out),
            node("mul", "mul", [nd("bmm"), const(0.5)], out),
            node("lsm", "log_softmax", [nd("mul")], out, dim=2),
        ],
        ["lsm"],
    )
    problem = (
        HEADER
        + '''class Model(nn.Module):
    """log_softmax(bmm(a, b) * 0.5)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.log_softmax(torch.bmm(a, b) * 0.5, dim=-1)
'''
        + _inputs((batch, m, k), (batch, k, n))
        + "\n\ndef get_init_inputs():\n    return []\n"
    )
    return Case(
        "bmm_scale_log_softmax", ir, problem, ("gemm", "row_reduction"), (("bmm", "mul"), ("lsm",))
    )


def _stateless(doc: str, forward: str, *shapes: tuple[int, ...], scale: float = 1.0) -> str:
    """A problem whose Model has no state: its docstring, forward's source (indented as in a
    class), and random inputs of `shapes`."""
    model = (
        f'class Model(nn.Module):\n    """{doc}"""\n\n    def __init__(self):\n'
        f"        super().__init__()\n\n{forward}"
    )
    inputs = _inputs(*shapes, scale=scale)
    return HEADER + model + inputs + "\n\ndef get_init_inputs():\n    return []\n"


# ---- reductions and softmax along a middle or leading dim (axis kernels) ----------------------


def axis_reductions(a: int = 3, c: int = 33, w: int = 40) -> Case:
    """Four reductions of one tensor, each along another dim: four axis kernels."""
    x = [a, c, w]
    ir = graph(
        [tensor("x", x)],
        [],
        [
            node("total", "sum", [inp("x")], [a, 1, w], dim=[1], keepdim=True),
            node("half", "mul", [nd("total"), const(0.5)], [a, 1, w]),
            node("avg", "mean", [inp("x")], [c, w], dim=[0], keepdim=False),
            node("top", "amax", [inp("x")], [a, w], dim=[1], keepdim=False),
            node("tenth", "mul", [inp("x"), const(0.1)], x),
            node("near_one", "add", [nd("tenth"), const(1.0)], x, alpha=1),
            node("product", "prod", [nd("near_one")], [c, w], dim=[0], keepdim=False),
        ],
        ["half", "avg", "top", "product"],
    )
    forward = """    def forward(self, x):
        product = torch.prod(x * 0.1 + 1.0, dim=0)
        return x.sum(1, keepdim=True) * 0.5, x.mean(0), torch.max(x, dim=1)[0], product
"""
    problem = _stateless(
        "x.sum(1, keepdim=True) * 0.5, x.mean(0), torch.max(x, dim=1)[0], a product along 0.",
        forward,
        (a, c, w),
    )
    kinds = ("axis_reduction",) * 4
    nodes = (("total", "half"), ("avg",), ("top",), ("tenth", "near_one", "product"))
    return Case("axis_reductions", ir, problem, kinds, nodes)


def axis_softmax(n: int = 4, c: int = 37, h: int = 3, w: int = 5, long: int = 1100) -> Case:
    """softmax(x * 2) over channels of NCHW, with a scaled prologue; min over a size-1 dim and
    the next; a sum over a long middle dim (longer than a block)."""
    x, y, z = [n, c, h, w], [5, 1, 6, 2], [2, long, 3]
    ir = graph(
        [tensor("x", x), tensor("y", y), tensor("z", z)],
        [],
        [
            node("scaled", "mul", [inp("x"), const(2.0)], x),
            node("probs", "softmax", [nd("scaled")], x, dim=1),
            node("low", "amin", [inp("y")], [5, 1, 1, 2], dim=[1, 2], keepdim=True),
            node("long_sum", "sum", [inp("z")], [2, 3], dim=[1], keepdim=False),
        ],
        ["probs", "low", "long_sum"],
    )
    forward = """    def forward(self, x, y, z):
        low = torch.amin(y, dim=(1, 2), keepdim=True)
        return torch.softmax(x * 2.0, dim=1), low, z.sum(dim=1)
"""
    problem = _stateless(
        "softmax over channels, amin over a size-1 dim and the next, a sum along a long dim.",
        forward,
        (n, c, h, w),
        (5, 1, 6, 2),
        (2, long, 3),
    )
    kinds = ("axis_reduction",) * 3
    return Case("axis_softmax", ir, problem, kinds, (("scaled", "probs"), ("low",), ("long_sum",)))


def axis_normalise_by_hand(n: int = 6, c: int = 9, w: int = 17) -> Case:
    """x / (x.abs().sum(dim=1, keepdim=True) + 1e-6): the row value read back by every element
    of its axis, in one two-sweep axis kernel."""
    x, row = [n, c, w], [n, 1, w]
    nodes = ("mag", "l1", "l1_eps", "normed")
    ir = graph(
        [tensor("x", x)],
        [],
        [
            node("mag", "abs", [inp("x")], x),
            node("l1", "sum", [nd("mag")], row, dim=[1], keepdim=True),
            node("l1_eps", "add", [nd("l1"), const(1e-6)], row, alpha=1),
            node("normed", "div", [inp("x"), nd("l1_eps")], x),
        ],
        ["normed"],
    )
    forward = """    def forward(self, x):
        return x / (x.abs().sum(dim=1, keepdim=True) + 1e-6)
"""
    problem = _stateless("An L1 normalisation along dim 1.", forward, (n, c, w))
    return Case("axis_normalise_by_hand", ir, problem, ("axis_reduction",), (nodes,))


def reductions_over_dims_apart(n: int = 5, c: int = 6, h: int = 3, w: int = 4) -> Case:
    """x.mean(dim=(0, 2, 3)) as BatchNorm by hand writes it, and amax over dims 0 and 2: each a
    chain (the later block first) of a row or axis kernel and an axis kernel."""
    x = [n, c, h, w]
    ir = graph(
        [tensor("x", x)],
        [],
        [
            node("channel_mean", "mean", [inp("x")], [c], dim=[0, 2, 3], keepdim=False),
            node("peak", "amax", [inp("x")], [1, c, 1, w], dim=[0, 2], keepdim=True),
        ],
        ["channel_mean", "peak"],
    )
    forward = """    def forward(self, x):
        return x.mean(dim=(0, 2, 3)), torch.amax(x, dim=(0, 2), keepdim=True)
"""
    problem = _stateless(
        "Reductions over dims that keep a dim between them.", forward, (n, c, h, w)
    )
    kinds = ("row_reduction", "axis_reduction", "axis_reduction", "axis_reduction")
    nodes = (("channel_mean.part0",), ("channel_mean",), ("peak.part0",), ("peak",))
    return Case("reductions_over_dims_apart", ir, problem, kinds, nodes)


def long_row_reductions(rows: int = 64, cols: int = 2048) -> Case:
    """A whole-tensor MSE and a max over long rows: few rows, so each reduction runs in two
    stages (parts of 512, then the parts), its prologue in the first."""
    x, every = [rows, cols], [0, 1]
    ir = graph(
        [tensor("a", x), tensor("b", x)],
        [],
        [
            node("diff", "sub", [inp("a"), inp("b")], x, alpha=1),
            node("square", "mul", [nd("diff"), nd("diff")], x),
            node("loss", "mean", [nd("square")], [], dim=every, keepdim=False),
            node("peak", "amax", [inp("a")], [rows, 1], dim=[1], keepdim=True),
        ],
        ["loss", "peak"],
    )
    forward = """    def forward(self, a, b):
        return torch.mean((a - b) ** 2), a.amax(dim=1, keepdim=True)
"""
    problem = _stateless("A whole-tensor MSE and a max over long rows.", forward, x, x)
    nodes = (
        ("diff", "square", "loss.partial", "loss.chunks"),
        ("loss.total", "loss"),
        ("peak.partial",),  # its chunks view an input: no kernel's alias
        ("peak.total", "peak"),
    )
    return Case("long_row_reductions", ir, problem, ("row_reduction",) * 4, nodes)


def logsumexp_two_ways(a: int = 5, c: int = 7, w: int = 300) -> Case:
    """logsumexp over the last dim (a row kernel) and over dim 1 (an axis kernel), keepdim."""
    x = [a, c, w]
    ir = graph(
        [tensor("x", x)],
        [],
        [
            node("lse_rows", "logsumexp", [inp("x")], [a, c], dim=[2], keepdim=False),
            node("lse_axis", "logsumexp", [inp("x")], [a, 1, w], dim=[1], keepdim=True),
        ],
        ["lse_rows", "lse_axis"],
    )
    forward = """    def forward(self, x):
        return torch.logsumexp(x, dim=-1), x.logsumexp(1, keepdim=True)
"""
    problem = _stateless(
        "torch.logsumexp along the last dim and along dim 1.", forward, (a, c, w), scale=10.0
    )
    kinds = ("row_reduction", "axis_reduction")
    return Case("logsumexp_two_ways", ir, problem, kinds, (("lse_rows",), ("lse_axis",)))


NORM_LAYERS_MODEL = '''class Model(nn.Module):
    """The norm layers and normalisations KernelBench writes, side by side."""

    def __init__(self, channels, groups):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.bn_eval = nn.BatchNorm2d(channels).eval()
        self.inorm = nn.InstanceNorm2d(channels, affine=True)
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x):
        rms = x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-5)
        return (
            self.bn(x),
            self.bn_eval(x),
            self.inorm(x),
            self.gn(x),
            F.normalize(x, dim=1),
            x / torch.norm(x),
            torch.linalg.vector_norm(x, ord=3, dim=(2, 3)),
            rms,
        )
'''


def _captured_ir(problem: str, init_inputs: list) -> dict:
    """The IR the capture lowers `problem` to (in-process: the problem is ours), on the inputs
    of its get_inputs."""
    import torch

    from gpu_workers.harness.capture.graph import lower

    scope: dict = {}
    exec(compile(problem, "problem", "exec"), scope)  # noqa: S102 - our own source
    torch.manual_seed(0)
    return lower(scope["Model"](*init_inputs), scope["get_inputs"](), "cpu")


def norm_layers(n: int = 4, c: int = 6, h: int = 5, w: int = 7, groups: int = 3) -> Case:
    """BatchNorm (training and eval), InstanceNorm, GroupNorm, F.normalize, x / ||x||, a p-norm
    and KernelBench's hand-written RMSNorm over dim 1, as the capture lowers them."""
    problem = (
        HEADER
        + NORM_LAYERS_MODEL
        + _inputs((n, c, h, w))
        + f"\n\ndef get_init_inputs():\n    return [{c}, {groups}]\n"
    )
    ir = _captured_ir(problem, [c, groups])
    axis, row, pointwise = "axis_reduction", "row_reduction", "pointwise"
    kinds = (axis, row, axis, row, axis, pointwise, pointwise, pointwise, row, row, axis, row, row)
    nodes = (
        ("pow_1", "mean", "add", "sqrt", "truediv"),  # RMSNorm over dim 1: one axis kernel
        ("bn.mean.part0",),  # the mean over [0, 2, 3]: [2, 3] first
        ("bn.mean",),
        ("bn.centred", "bn.square", "bn.var.part0"),
        ("bn.var", "bn.var_eps", "bn.rstd"),
        ("bn.normed", "bn.scaled", "bn"),
        ("bn_eval.var_eps", "bn_eval.rstd"),
        ("bn_eval.centred", "bn_eval.normed", "bn_eval.scaled", "bn_eval"),
        ("inorm.normed", "inorm.scaled", "inorm"),
        ("gn.normed", "gn.scaled", "gn", "gn.ungrouped"),
        ("normalize.square", "normalize.sum", "normalize.norm", "normalize.clamp", "normalize"),
        ("norm.square", "norm.sum", "norm", "truediv_1"),
        ("linalg_vector_norm.abs", "linalg_vector_norm.pow", "linalg_vector_norm.sum",
         "linalg_vector_norm"),
    )  # fmt: skip
    return Case("norm_layers", ir, problem, kinds, nodes)


LOSSES_MODEL = '''class Model(nn.Module):
    """The losses KernelBench writes, side by side (modules and functionals)."""

    def __init__(self):
        super().__init__()
        self.huber = nn.HuberLoss(delta=0.5)
        self.triplet = nn.TripletMarginLoss(margin=1.0)
        self.cosine = nn.CosineSimilarity(dim=1)

    def forward(self, predictions, targets, negatives):
        probs = torch.softmax(predictions, dim=-1)
        target_probs = torch.softmax(targets, dim=-1)
        return (
            F.mse_loss(predictions, targets),
            F.smooth_l1_loss(predictions, targets),
            self.huber(predictions, targets),
            torch.mean(torch.clamp(1 - predictions * targets, min=0)),
            F.kl_div(torch.log(probs), target_probs, reduction="batchmean"),
            torch.mean(1 - self.cosine(predictions, targets)),
            self.triplet(predictions, targets, negatives),
            F.l1_loss(predictions, targets, reduction="sum"),
        )
'''


def losses(rows: int = 12, cols: int = 37) -> Case:
    """MSE, smooth L1, Huber, hinge (by hand), KL divergence, cosine similarity, triplet margin
    and L1 (sum), as the capture lowers them: whole-tensor means are one-row kernels."""
    shape = (rows, cols)
    problem = HEADER + LOSSES_MODEL + _inputs(shape, shape, shape)
    problem += "\n\ndef get_init_inputs():\n    return []\n"
    ir = _captured_ir(problem, [])
    kinds = ("row_reduction",) * 15
    nodes = (
        ("softmax", "log"),
        ("softmax_1", "kl_div.log_target", "kl_div.gap", "kl_div.term"),
        ("mse_loss.diff", "mse_loss.square", "mse_loss"),
        tuple(f"smooth_l1_loss.{s}" for s in HUBER_STEPS) + ("smooth_l1_loss",),
        tuple(f"huber.{s}" for s in HUBER_STEPS) + ("huber",),
        ("mul", "sub", "clamp", "mean"),
        ("kl_div.sum", "kl_div"),
        ("cosine.x1_square", "cosine.x1_sum", "cosine.x1_norm", "cosine.x1_floor"),
        ("cosine.x2_square", "cosine.x2_sum", "cosine.x2_norm", "cosine.x2_floor", "cosine.scale"),
        ("cosine.product", "cosine.dot", "cosine", "sub_1"),
        ("mean_1",),
        tuple(f"triplet.positive_{s}" for s in DISTANCE_STEPS),
        tuple(f"triplet.negative_{s}" for s in DISTANCE_STEPS)
        + ("triplet.gap", "triplet.margin", "triplet.hinge"),
        ("triplet",),
        ("l1_loss.diff", "l1_loss.abs", "l1_loss"),
    )
    return Case("losses", ir, problem, kinds, nodes)


HUBER_STEPS = ("diff", "abs", "inside", "square", "quadratic", "beyond", "term")
DISTANCE_STEPS = ("diff", "shifted", "square", "sum", "distance")


def scans(a: int = 3, c: int = 37, w: int = 5, long: int = 1500) -> Case:
    """cumsum along a middle dim after a prologue, cumprod along the last, a cumsum along a row
    longer than a block followed by an epilogue: a scan kernel each, the rest pointwise."""
    x, z = [a, c, w], [2, long]
    ir = graph(
        [tensor("x", x), tensor("z", z)],
        [],
        [
            node("half", "mul", [inp("x"), const(0.5)], x),
            node("running", "cumsum", [nd("half")], x, dim=1),
            node("products", "cumprod", [inp("x")], x, dim=2),
            node("long_sum", "cumsum", [inp("z")], z, dim=1),
            node("doubled", "mul", [nd("long_sum"), const(2.0)], z),
        ],
        ["running", "products", "doubled"],
    )
    forward = """    def forward(self, x, z):
        return torch.cumsum(x * 0.5, dim=1), torch.cumprod(x, dim=-1), z.cumsum(1) * 2.0
"""
    problem = _stateless("Scans along a middle dim, the last dim and a long row.", forward, x, z)
    kinds = ("pointwise", "scan", "scan", "scan", "pointwise")
    nodes = (("half",), ("running",), ("products",), ("long_sum",), ("doubled",))
    return Case("scans", ir, problem, kinds, nodes)


# ---- int64 out, bool and int64 in, windows: argmax, scans as KernelBench writes them, pooling,
# cross-entropy (each IR is the capture's lowering of its problem) -------------------------------


def _captured_case(name, problem, kinds, nodes, init_inputs=()) -> Case:
    return Case(name, _captured_ir(problem, list(init_inputs)), problem, kinds, nodes)


LONG_ROW_NORMS_MODEL = '''class Model(nn.Module):
    """KernelBench's LayerNorm over every dim but the batch, and an RMSNorm the same way."""

    def __init__(self, shape):
        super().__init__()
        self.ln = nn.LayerNorm(shape)
        self.shape = shape

    def forward(self, x):
        return self.ln(x), F.rms_norm(x * 2.0, self.shape, eps=1e-6)
'''


def long_row_norms(n: int = 2, shape: tuple[int, ...] = (8, 32, 32)) -> Case:
    """A layer_norm and an rms_norm of few long rows (2 of 8192): written as split reductions
    and pointwise steps, each mean in two stages over parts that fill the GPU."""
    problem = (
        HEADER
        + LONG_ROW_NORMS_MODEL
        + _inputs((n, *shape))
        + f"\n\ndef get_init_inputs():\n    return [{shape!r}]\n"
    )
    row, pointwise = "row_reduction", "pointwise"
    kinds = (row, row, row, row, row, row, pointwise)
    nodes = (
        ("ln.mean.partial",),  # its chunks view an input: no kernel's alias
        ("ln.mean.total", "ln.mean"),
        ("ln.deviation", "ln.square", "ln.variance.partial", "ln.variance.chunks"),
        ("ln.variance.total", "ln.spread_eps", "ln.rstd", "ln.variance"),
        # the layer norm's last pass, then the rms_norm's prologue over the same elements
        ("ln.centred", "ln.normed", "ln.mul_ln.weight", "ln", "mul", "rms_norm.square",
         "rms_norm.mean_square.partial", "rms_norm.mean_square.chunks"),
        ("rms_norm.mean_square.total", "rms_norm.spread_eps", "rms_norm.rstd",
         "rms_norm.mean_square"),
        ("rms_norm",),  # x * 2 times its row's rstd, renamed as the norm's output
    )  # fmt: skip
    return _captured_case("long_row_norms", problem, kinds, nodes, [shape])


ARG_REDUCTIONS_MODEL = '''class Model(nn.Module):
    """argmax / argmin along a middle dim, the last dim (keepdim), beside a size-1 dim, over
    everything, and torch.max's indices; the inputs are small integers, so ties are many."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (
            torch.argmax(x, dim=1),
            x.argmin(dim=-1, keepdim=True),
            torch.argmax(y, 2),
            torch.argmin(y),
            torch.max(x, dim=2)[1],
        )


def get_inputs():
    return [torch.randint(0, 7, ({a}, {c}, {w})).float(), torch.randn({a}, 1, 9)]


def get_init_inputs():
    return []
'''


def arg_reductions(a: int = 3, c: int = 37, w: int = 1029) -> Case:
    """argmax / argmin (int64 out) along a middle dim, a last dim longer than a block (keepdim),
    beside a size-1 dim and over every dim, and torch.max(x, dim)[1]: an arg_reduction each."""
    problem = HEADER + ARG_REDUCTIONS_MODEL.format(a=a, c=c, w=w)
    nodes = (("argmax",), ("argmin",), ("argmax_1",), ("argmin_1",), ("getitem",))
    return _captured_case("arg_reductions", problem, ("arg_reduction",) * 5, nodes)


KERNELBENCH_SCANS_MODEL = '''class Model(nn.Module):
    """Scans as KernelBench writes them: reverse (flip, cumsum, flip), exclusive (cat of a zero
    and the scan of all but the last element; cumprod behind a one), and masked (x * mask)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask, z, w):
        reverse = torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)
        exclusive = torch.cumsum(z.narrow(dim=1, start=0, length=z.size(1) - 1), dim=1)
        exclusive = torch.cat((torch.zeros_like(z.select(1, 0).unsqueeze(1)), exclusive), dim=1)
        products = torch.cumprod(x.narrow(dim=2, start=0, length=x.size(2) - 1), dim=2)
        products = torch.cat((torch.ones_like(x.select(2, 0).unsqueeze(2)), products), dim=2)
        long_reverse = torch.flip(torch.cumsum(torch.flip(z, [1]), 1), [1])
        size_one = torch.cumsum(w.flip(0), 0).flip(0)
        masked = torch.cumsum(x * mask, dim=self.dim)
        return reverse, exclusive, products, long_reverse, size_one, masked


def get_inputs():
    x = torch.rand({a}, {c}, {w}) + 0.5
    return [x, torch.randint(0, 2, x.shape).bool(), torch.rand(2, {long}), torch.rand(1, 4)]


def get_init_inputs():
    return [1]
'''


def kernelbench_scans(a: int = 3, c: int = 37, w: int = 5, long: int = 1500) -> Case:
    """Reverse, exclusive and masked scans along a middle dim, the last dim, a row longer than a
    block and a size-1 dim: a scan kernel each (flips and the cat are never materialised), the
    mask's multiply a pointwise kernel that reads bools."""
    problem = HEADER + KERNELBENCH_SCANS_MODEL.format(a=a, c=c, w=w, long=long)
    kinds = ("scan",) * 5 + ("pointwise", "scan")
    nodes = (("cumsum",), ("cat",), ("cat_1",), ("cumsum_2",), ("cumsum_3",), ("mul",),
             ("cumsum_4",))  # fmt: skip
    return _captured_case("kernelbench_scans", problem, kinds, nodes, [1])


POOLING_MODEL = '''class Model(nn.Module):
    """Max and average pooling in 1, 2 and 3 dims: strides, padding, dilation, ceil_mode,
    count_include_pad and divisor_override."""

    def __init__(self):
        super().__init__()
        self.max1 = nn.MaxPool1d(kernel_size=4, stride=1, padding=2, dilation=3)
        self.max2 = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.max3 = nn.MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=2)
        self.avg1 = nn.AvgPool1d(kernel_size=4, stride=1, padding=2)
        self.avg2 = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        self.avg3 = nn.AvgPool3d(kernel_size=3, stride=2, padding=1, ceil_mode=True)

    def forward(self, a, b, c):
        return (
            self.max1(a),
            self.max2(b),
            self.max3(c),
            self.avg1(a),
            self.avg2(b),
            self.avg3(c),
            F.avg_pool2d(b, 2, divisor_override=3),
            F.max_pool2d(b, (2, 3)),
        )


def get_inputs():
    return [torch.randn(2, 3, {length}), torch.randn(2, 1, 9, 7), torch.randn(1, 2, 7, 6, 5)]


def get_init_inputs():
    return []
'''


def pooling(length: int = 1100) -> Case:
    """nn.MaxPool1d/2d/3d, nn.AvgPool1d/2d/3d and F.avg_pool2d / F.max_pool2d: a pooling kernel
    each, over odd sizes, a size-1 channel dim and a 1-d row longer than a block."""
    problem = HEADER + POOLING_MODEL.format(length=length)
    names = ("max1", "max2", "max3", "avg1", "avg2", "avg3", "avg_pool2d", "max_pool2d")
    nodes = tuple((n,) for n in names)
    return _captured_case("pooling", problem, ("pooling",) * 8, nodes)


CROSS_ENTROPY_MODEL = '''class Model(nn.Module):
    """Cross-entropy over int64 class targets: F.cross_entropy (mean) over long rows, the module
    (sum) over [N, C, d1, d2], and reduction="none" over one class."""

    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(reduction="sum")

    def forward(self, x, t, y, u, z, v):
        return F.cross_entropy(x, t), self.loss(y, u), F.cross_entropy(z, v, reduction="none")


def get_inputs():
    x, t = torch.randn({rows}, {classes}) * 3, torch.randint(0, {classes}, ({rows},))
    y, u = torch.randn(4, 7, 3, 5), torch.randint(0, 7, (4, 3, 5))
    return [x, t, y, u, torch.randn(5, 1), torch.zeros(5, dtype=torch.int64)]


def get_init_inputs():
    return []
'''


def cross_entropy(rows: int = 300, classes: int = 1029) -> Case:
    """logsumexp of the logits (a row or axis kernel), minus the target's logit picked where it
    lies, reduced: the log-probabilities are never written."""
    problem = HEADER + CROSS_ENTROPY_MODEL.format(rows=rows, classes=classes)
    kinds = ("row_reduction", "row_reduction", "axis_reduction", "row_reduction",
             "row_reduction", "pointwise")  # fmt: skip
    steps = ("logit", "term")
    nodes = (
        ("cross_entropy.logsumexp",),
        tuple(f"cross_entropy.{s}" for s in steps) + ("cross_entropy",),
        ("loss.logsumexp",),
        tuple(f"loss.{s}" for s in steps) + ("loss",),
        ("cross_entropy_1.logsumexp",),
        tuple(f"cross_entropy_1.{s}" for s in steps) + ("cross_entropy_1",),
    )
    return _captured_case("cross_entropy", problem, kinds, nodes)


PERMUTES_MODEL = '''class Model(nn.Module):
    """Transposes and permutes: KernelBench's transposed matmuls (16, 18), a softmax over a
    transposed view, a permute before an activation, a parameter's w.t() added (not a linear),
    and batched products of transposed operands (A's, B's, A's against one B)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn({b}, {c}))

    def forward(self, a, b, m, x):
        return (
            torch.matmul(a.T, b),
            torch.matmul(a.T, m.T),
            torch.softmax(x.transpose(1, 2), dim=-1) * 2.0,
            x.permute(2, 0, 1).relu(),
            x.mT + self.w.t(),
            torch.bmm(x.transpose(1, 2), x),
            torch.matmul(x, x.mT),
            torch.matmul(x.mT, self.w),
        )


def get_inputs():
    return [
        torch.randn({k}, {m}),
        torch.randn({k}, {n}),
        torch.randn({n}, {k}),
        torch.randn({a}, {b}, {c}),
    ]


def get_init_inputs():
    return []
'''


def permutes(k: int = 24, m: int = 20, n: int = 36, a: int = 3, b: int = 7, c: int = 12) -> Case:
    """A GEMM's transposed operand read as it lies, by the GEMM (its transposes in no kernel:
    tn, tt, batched tn and nt, a batched tn against one B); every other transpose a copy reading
    its operand at the permuted position: before a row kernel (its prologue), before a pointwise
    op, and a parameter's."""
    problem = HEADER + PERMUTES_MODEL.format(k=k, m=m, n=n, a=a, b=b, c=c)
    # x.mT reads only an input, so it joins the last pointwise group over as many elements
    # (permute, relu); w.t() is a parameter's copy of its own size, and the add reads both
    kinds = ("gemm", "gemm", "row_reduction", "pointwise", "pointwise", "pointwise",
             "gemm", "gemm", "gemm")  # fmt: skip
    nodes = (
        ("matmul",),
        ("matmul_1",),
        ("transpose", "softmax", "mul"),
        ("permute", "relu", "getattr_4"),
        ("t",),
        ("add",),
        ("bmm",),
        ("matmul_2",),
        ("matmul_3",),
    )
    return _captured_case("permutes", problem, kinds, nodes)


CONTRACTIONS_MODEL = '''class Model(nn.Module):
    """einsum as KernelBench's 11 writes it and in other forms (a bmm, a transposed operand, a
    matrix-vector product, a dot product, a sum, a permute), and attention (KernelBench 97)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b, x, y, m, v, q, k, w):
        return (
            torch.einsum("bijl,lk->bijk", a, b),
            torch.einsum("bij,bjk->bik", x, y),
            torch.einsum("ik,jk->ij", m, b.T),
            torch.einsum("ij,j->i", m, v),
            torch.einsum("i,i", v, v),
            torch.einsum("ij->j", m),
            torch.einsum("ij->ji", m),
            torch.einsum("bhqd,bhkd->bhqk", q, k),
            torch.nn.functional.scaled_dot_product_attention(q, k, w),
            torch.nn.functional.scaled_dot_product_attention(q, k, w, scale=0.5),
        )


def get_inputs():
    return [
        torch.randn(2, 3, 4, 6),
        torch.randn(6, 5),
        torch.randn(3, 4, 7),
        torch.randn(3, 7, 2),
        torch.randn(9, 6),
        torch.randn(6),
        torch.randn(2, 3, 5, 8),
        torch.randn(2, 3, 5, 8),
        torch.randn(2, 3, 5, 4),
    ]


def get_init_inputs():
    return []
'''


def contractions() -> Case:
    """einsum and attention lowered to matmuls between permutes and reshapes."""
    problem = HEADER + CONTRACTIONS_MODEL
    # the key's transpose is read by the GEMM as it lies (transposed_operands): no kernel
    attention = ("scores", "scaled"), ("weights",)
    nodes = [
        ("einsum.product", "einsum.product_shaped", "einsum"),  # reshapes alias: one GEMM
        ("einsum_1.product", "einsum_1.product_shaped", "einsum_1"),
        ("getattr_1",),  # b.T, copied; permuted back for "ik,jk", which the GEMM reads as it lies
        ("einsum_2.product", "einsum_2.product_shaped", "einsum_2"),
        ("einsum_3.product", "einsum_3.product_shaped", "einsum_3"),
        ("einsum_4.product", "einsum_4.product_shaped", "einsum_4"),
        ("einsum_5.sum0", "einsum_5"),
        ("einsum_6",),
        ("einsum_7.b_permuted", "einsum_7.b_matrix"),
        ("einsum_7.product", "einsum_7.product_shaped", "einsum_7"),
    ]
    for call in ("scaled_dot_product_attention", "scaled_dot_product_attention_1"):
        nodes += [tuple(f"{call}.{step}" for step in steps) for steps in attention] + [(call,)]
    kinds = (
        "gemm",
        "gemm",
        "pointwise",
        "gemm",
        "gemm",
        "gemm",
        "axis_reduction",
        "pointwise",
        "pointwise",
        "gemm",
    ) + ("gemm", "row_reduction", "gemm") * 2
    return _captured_case("contractions", problem, kinds, tuple(nodes))  # fmt: skip


MADE_IN_FORWARD_MODEL = '''class Model(nn.Module):
    """Tensors made in the forward that hold one value: KernelBench level 2's
    torch.min(x, torch.tensor(c, device=x.device)), a constant fx folds, a fill that widens."""

    def __init__(self):
        super().__init__()
        self.c = -0.5

    def forward(self, x, y):
        low = torch.min(x, torch.tensor(0.25, device=x.device)) * torch.full_like(x, 2.0)
        return (
            torch.softmax(low + torch.ones({rows}, 1, device=x.device), dim=-1),
            torch.max(y, torch.tensor(self.c)),
        )


def get_inputs():
    return [torch.randn({rows}, {cols}), torch.randn({cols})]


def get_init_inputs():
    return []
'''


def made_in_forward(rows: int = 3, cols: int = 40) -> Case:
    """The fills are constant operands: the pointwise ops join the softmax's prologue."""
    problem = HEADER + MADE_IN_FORWARD_MODEL.format(rows=rows, cols=cols)
    nodes = (("min_1", "mul", "add", "softmax"), ("max_1",))
    return _captured_case("made_in_forward", problem, ("row_reduction", "pointwise"), nodes)


POSITIONS_MODEL = '''class Model(nn.Module):
    """Tensors made in the forward whose values are positions: a causal mask of two int64
    aranges seen through views, a float ramp of frequencies, an arange converted to float, an
    identity added and a non-square eye."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        t = x.size(-1)
        rows = torch.arange(t, device=x.device).view(t, 1)
        cols = torch.arange(t, device=x.device).view(1, t)
        causal = torch.softmax(x.masked_fill(cols > rows, float("-inf")), dim=-1)
        freqs = torch.arange(0, {d}, 2, dtype=torch.float32, device=x.device) / {d}
        ramp = torch.arange(3, 3 + {half}, device=x.device).float()
        return (
            causal,
            torch.sin(y * freqs) + ramp,
            z + torch.eye({n}, device=x.device) * 2.0,
            z * torch.eye({n}, {n}, dtype=torch.bool, device=x.device),
        )


def get_inputs():
    return [torch.randn(2, {t}, {t}), torch.randn(5, {half}), torch.randn({n}, {n})]


def get_init_inputs():
    return []
'''


def positions(t: int = 9, d: int = 12, n: int = 6) -> Case:
    """Each arange and eye, and what is computed from them alone (the frequencies, the ramp,
    the causal mask), is computed where it is read: no kernel of its own, no buffer."""
    problem = HEADER + POSITIONS_MODEL.format(t=t, d=d, half=d // 2, n=n)
    kinds = ("row_reduction", "pointwise", "pointwise")
    nodes = (
        ("masked_fill", "softmax"),
        ("mul", "sin", "add"),
        ("eye", "mul_1", "add_1", "eye_1", "mul_2"),
    )
    return _captured_case("positions", problem, kinds, nodes)


TRIANGLES_MODEL = '''class Model(nn.Module):
    """tril / triu: of a product (KernelBench 14, 15), of an input at other diagonals and on
    non-square matrices, and before a softmax (a row kernel's prologue)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b, x):
        return (
            torch.tril(torch.matmul(a, b)),
            torch.triu(torch.matmul(a, b)),
            x.tril(1) * 2.0,
            torch.triu(x, diagonal=-2),
            torch.softmax(x.tril(), dim=-1),
        )


def get_inputs():
    return [torch.randn({n}, {n}), torch.randn({n}, {n}), torch.randn(2, 5, 7)]


def get_init_inputs():
    return []
'''


def triangles(n: int = 24) -> Case:
    """Each triangle reads its operand where it lies: after a GEMM, a kernel of its own."""
    problem = HEADER + TRIANGLES_MODEL.format(n=n)
    # the triangles of inputs read nothing another kernel makes: one group, taken over by the
    # softmax as its prologue
    kinds = ("gemm", "pointwise", "gemm", "pointwise", "row_reduction")
    nodes = (
        ("matmul",),
        ("tril",),
        ("matmul_1",),
        ("triu",),
        ("tril_1", "mul", "triu_1", "tril_2", "softmax"),
    )
    return _captured_case("triangles", problem, kinds, nodes)


CONCAT_MODEL = '''class Model(nn.Module):
    """torch.cat as Inception blocks and U-Nets join branches: along channels (a middle dim) of
    two kernels' values, along the last dim of three parts of unequal lengths (an input twice),
    then pointwise ops and a softmax over the joined dim, a cat of inputs returned as is, and a
    stack (a cat of its parts seen with a new dim)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b, x, y):
        branches = torch.cat([torch.relu(a), b * 2.0], dim=1)
        row = torch.cat((x, torch.sigmoid(y), x), dim=-1)
        pairs = torch.stack((y, y * 3.0), dim=-1)
        return branches * 0.5 + 1.0, torch.softmax(row, dim=-1), torch.cat([x, y], 1), pairs


def get_inputs():
    return [torch.randn({n}, 3, {h}, 5), torch.randn({n}, 4, {h}, 5), torch.randn({r}, 7),
            torch.randn({r}, 4)]


def get_init_inputs():
    return []
'''


def concat(n: int = 2, h: int = 6, r: int = 9) -> Case:
    """Each part read where it lies, the cat's value computed where it is read: a pointwise
    kernel of its own, or a softmax's prologue."""
    problem = HEADER + CONCAT_MODEL.format(n=n, h=h, r=r)
    kinds = ("pointwise", "pointwise", "pointwise", "pointwise", "row_reduction")
    kinds += ("pointwise", "pointwise", "pointwise")
    nodes = (
        ("relu",),
        ("mul",),
        ("cat", "mul_2", "add"),
        ("sigmoid",),
        ("cat_1", "softmax"),
        ("mul_1", "stack.part1"),
        ("stack",),
        ("cat_2",),
    )
    return _captured_case("concat", problem, kinds, nodes)


SLICES_MODEL = '''class Model(nn.Module):
    """Basic indexing as models write it: a causal mask buffer cut to the sequence (minGPT's
    `self.bias[:, :, :T, :T]`), the last token (`x[:, -1]`), every other channel with a new axis
    (`x[:, ::2, None]`), a window off both ends, then pointwise ops and a softmax; a gated unit's
    halves (`chunk`) and a split into sections of unequal lengths."""

    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones({m}, {m})).view(1, 1, {m}, {m}))

    def forward(self, att, x, y):
        t = att.size(-1)
        value, gate = y.chunk(2, dim=-1)
        head, tail = torch.split(y, [3, 5], 1)
        masked = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        return (
            torch.softmax(masked, dim=-1),
            x[:, -1] * 2.0,
            torch.relu(x[:, ::2, None]),
            x[:, 1:-1, 2:] + 1.0,
            value * torch.sigmoid(gate),
            torch.softmax(tail, dim=-1) - head.sum(-1, keepdim=True),
        )


def get_inputs():
    return [torch.randn(2, 3, {t}, {t}), torch.randn(4, {c}, 7), torch.randn(6, 8)]


def get_init_inputs():
    return []
'''


def slices(m: int = 12, t: int = 9, c: int = 5) -> Case:
    """Each slice reads its operand where it lies (strided terms and an offset), in the kernel
    that reads it; the mask's slice is computed again in the softmax's kernel."""
    problem = HEADER + SLICES_MODEL.format(m=m, t=t, c=c)
    kinds = ("pointwise", "row_reduction", "row_reduction", "row_reduction")
    kinds += ("pointwise", "pointwise", "pointwise")
    nodes = (
        ("getitem", "getitem_1", "sigmoid", "mul_1"),  # both halves of y in one pass
        ("getitem_2", "sum_1"),
        ("getitem_3", "softmax_1", "sub"),
        ("masked_fill", "softmax"),
        ("getitem_5.slice", "mul", "getitem_5"),
        ("getitem_6.slice", "relu", "getitem_6"),
        ("getitem_7", "add"),
    )
    return _captured_case("slices", problem, kinds, nodes)


SCALAR_INPUT_MODEL = '''class Model(nn.Module):
    """A Python number passed to forward (KernelBench 5's A * s), drawn anew for every seed: a
    kernel that baked the captured number in would fail the next seed. Read by a pointwise
    kernel, a row kernel and a GEMM's epilogue."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({cols}, 8)

    def forward(self, a, s):
        return torch.relu(a * s - s), torch.softmax(a * s, dim=-1), self.fc(a) * s


def get_inputs():
    return [torch.randn({rows}, {cols}), float(torch.rand(())) * 4.0]


def get_init_inputs():
    return []
'''


def scalar_input(rows: int = 8, cols: int = 96) -> Case:
    """The number reaches each kernel that reads it by value, never as a constant."""
    problem = HEADER + SCALAR_INPUT_MODEL.format(rows=rows, cols=cols)
    kinds = ("row_reduction", "gemm")
    nodes = (("mul", "sub", "relu", "mul_1", "softmax"), ("fc", "mul_2"))
    return _captured_case("scalar_input", problem, kinds, nodes)


MASKS_MODEL = '''class Model(nn.Module):
    """Masks as real models build them: a causal mask kept as a buffer (minGPT's
    `masked_fill(self.bias == 0, -inf)` before a softmax) or made in the forward (a triangle of
    ones or of -inf), comparisons, torch.where, ~ of a bool input, .float() of a mask, and a
    NaN test (x != x)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("causal", torch.tril(torch.ones({n}, {n})).view(1, {n}, {n}))

    def forward(self, x, keep):
        att = x.masked_fill(self.causal == 0, float("-inf"))
        probs = torch.softmax(att, dim=-1)
        gated = torch.where(x > 0.25, x, x * 0.5)
        flags = (x >= -0.5).float() + (~keep).float() * 2.0
        n = x.size(-1)
        made = torch.tril(torch.ones(n, n, device=x.device))  # causal masks made in the forward
        above = torch.triu(torch.full((n, n), float("-inf"), device=x.device), diagonal=1)
        return (
            probs,
            gated * flags,
            torch.where(keep, gated, 0.0) + (x != x).float(),
            torch.softmax(x + above, dim=-1) + x.masked_fill(made == 0, 0.0),
        )


def get_inputs():
    x = torch.randn({batch}, {n}, {n})
    return [x.masked_fill(x.abs() > 2.5, float("nan")), torch.rand({batch}, {n}, {n}) > 0.5]


def get_init_inputs():
    return []
'''


def masks(batch: int = 4, n: int = 24) -> Case:
    """A mask is a 0/1 in registers, read by the pointwise ops of the kernel that makes it; one
    of inputs and parameters that another kernel reads is recomputed there instead."""
    problem = HEADER + MASKS_MODEL.format(batch=batch, n=n)
    kinds = ("row_reduction", "row_reduction", "pointwise")
    # The buffer's mask (eq: smaller than x), both triangles made in the forward (made, above)
    # and their mask are computed where read: in no kernel of their own. The masks of inputs
    # (gt, ge, invert, ne) read no other kernel's value, so they join the group that reads
    # them, which the second softmax takes over. (TorchDynamo captures this forward, for its
    # sizes: nodes take the forward's variable names.)
    nodes = (
        ("att", "probs"),
        ("gt", "mul", "gated", "ge", "float_1", "invert", "float_2", "mul_1", "flags", "mul_2",
         "where_1", "ne", "float_3", "add_1", "add_2", "softmax_1"),
        ("masked_fill_1", "add_3"),
    )  # fmt: skip
    return _captured_case("masks", problem, kinds, nodes)


CONVOLUTIONS_MODEL = '''class Model(nn.Module):
    """Convolutions in 1, 2 and 3 dims, forward and transposed: strides, padding, dilation,
    groups, output_padding, with and without a bias, each followed by what KernelBench's level 2
    puts after one (an activation, a scaling, a bias, a reduction, a global average pooling);
    adaptive average pooling to one output a plane (a mean) and to sizes that divide the input's
    (an avg_pool)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2)
        self.conv2 = nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(1, 0), groups=2, bias=False)
        self.conv3 = nn.Conv3d(2, 3, 3, padding="valid")
        self.up1 = nn.ConvTranspose1d(4, 2, 4, stride=3, padding=1, output_padding=2)
        self.up2 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.up3 = nn.ConvTranspose3d(2, 2, (2, 3, 2), stride=(2, 1, 2), dilation=(1, 2, 1))
        self.scale = nn.Parameter(torch.randn(6, 1, 1))
        self.global_pool = nn.AdaptiveAvgPool3d((1, 1, 1))

    def forward(self, a, b, c):
        up = self.up3(c)
        return (
            torch.relu(self.conv1(a)),
            self.conv2(b) * self.scale + 1.0,
            self.conv3(c).sum(dim=1),
            self.up1(a),
            torch.sigmoid(self.up2(b)),
            up.mean(dim=(2, 3, 4)),
            self.global_pool(up) + 1.0,
            F.adaptive_avg_pool2d(b, (None, 4)),
            F.adaptive_avg_pool1d(a, 1),
        )


def get_inputs():
    return [torch.randn(2, 4, {length}), torch.randn(2, 4, 7, 8), torch.randn(1, 2, 5, 6, 4)]


def get_init_inputs():
    return []
'''


def convolutions(length: int = 37) -> Case:
    """Every convolution a kernel of its own (bias included), the pointwise ops after it its
    epilogue (relu; mul, add; sigmoid); a reduction after it a kernel reading its output."""
    problem = HEADER + CONVOLUTIONS_MODEL.format(length=length)
    kinds = ("convolution", "convolution", "convolution", "convolution", "axis_reduction",
             "convolution", "convolution", "row_reduction", "row_reduction", "pooling",
             "row_reduction")  # fmt: skip
    nodes = (
        ("up3",),
        ("conv1", "relu"),
        ("conv2", "mul", "add"),
        ("conv3",),
        ("sum_1",),
        ("up1",),
        ("up2", "sigmoid"),
        ("mean",),
        ("global_pool", "add_1"),  # a global average pooling is a mean, its epilogue joins
        ("adaptive_avg_pool2d",),  # to sizes that divide the input's: equal windows
        ("adaptive_avg_pool1d",),
    )
    return _captured_case("convolutions", problem, kinds, nodes)


CONV_EPILOGUES_MODEL = '''class Model(nn.Module):
    """Convolutions whose pointwise ops after them are their epilogue: one whose own output is
    returned beside the epilogue's (two outputs written by the transpose back), one whose
    epilogue reads a full-size input and a per-channel parameter, a transposed 3-d one clamped,
    and a depthwise one (the direct kernel, its epilogue in registers). Channels past one
    32-wide tile and odd spatial sizes leave the transpose's tiles part-full."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(5, 40, 3, padding=1)
        self.up = nn.ConvTranspose3d(3, 33, 2, stride=2, bias=False)
        self.depthwise = nn.Conv2d(5, 5, 3, padding=1, groups=5)
        self.scale = nn.Parameter(torch.randn(40, 1, 1))

    def forward(self, x, residual, v):
        y = self.conv(x)
        return (
            y,
            torch.tanh(y) * 2.0,
            F.gelu(y * self.scale + residual),
            torch.clamp(self.up(v), min=-0.5, max=0.5) / 3.0,
            torch.relu(self.depthwise(x)) - 1.0,
        )


def get_inputs():
    return [torch.randn(2, 5, 7, 9), torch.randn(2, 40, 7, 9), torch.randn(1, 3, 3, 5, 4)]


def get_init_inputs():
    return []
'''


def conv_epilogues() -> Case:
    """Each convolution one kernel with the pointwise ops after it (conv_epilogue.py)."""
    problem = HEADER + CONV_EPILOGUES_MODEL
    kinds = ("convolution", "convolution", "convolution")
    nodes = (
        ("conv", "tanh", "mul", "mul_1", "add", "gelu"),
        ("up", "clamp", "truediv"),
        ("depthwise", "relu", "sub"),
    )
    return _captured_case("conv_epilogues", problem, kinds, nodes)


def shape_branching() -> Case:
    """A forward that branches on a shape and makes a size a Python int: captured by TorchDynamo
    (symbolic_trace cannot follow it), then planned like any other graph."""
    problem = (
        Path(__file__).parents[2] / "fixtures/problems/fusion/shape_branching.py"
    ).read_text()
    nodes = (("x",), ("layer_norm", "gelu", "y", "mul", "softmax", "view"))
    return _captured_case("shape_branching", problem, ("gemm", "row_reduction"), nodes)


REQUIRED = [
    pointwise_gelu(),
    scaled_softmax(),
    residual_layer_norm(),
    rms_norm_by_hand(),
    linear_bias_relu(),
    row_sum_keepdim(),
]
EXTRA = [softmax_by_hand(), broadcast_zoo(), bmm_log_softmax(), activation_zoo()]
AXIS = [
    axis_reductions(),
    axis_softmax(),
    axis_normalise_by_hand(),
    reductions_over_dims_apart(),
    long_row_reductions(),
    logsumexp_two_ways(),
]
NORMS = [norm_layers(), losses(), long_row_norms()]
SCANS = [scans()]
COVERAGE = [
    arg_reductions(),
    kernelbench_scans(),
    pooling(),
    cross_entropy(),
    shape_branching(),
    permutes(),
    contractions(),
    made_in_forward(),
    positions(),
    triangles(),
    scalar_input(),
    masks(),
    convolutions(),
    conv_epilogues(),
    concat(),
    slices(),
]
ALL = REQUIRED + EXTRA + AXIS + NORMS + SCANS + COVERAGE

# dims 0 and 2 keep dim 1 between them: not one block of reduced dims
AMAX_DIMS_0_2 = graph(
    [tensor("x", [4, 5, 6])],
    [],
    [node("amax", "amax", [inp("x")], [5], dim=[0, 2], keepdim=False)],
    ["amax"],
)

CAPTURE_FAILED = graph(
    [tensor("x", [1, 3, 8, 8])],
    [tensor("conv1.weight", [4, 3, 3, 3], "parameter")],
    [],
    [],
    unsupported=[
        "conv2d (call_module conv1: Conv2d): padding_mode='reflect' is not supported; only zeros"
    ],
)
