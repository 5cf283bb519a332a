"""The fusion compiler without compiling anything: planning, the generated files' shape, the
source gate, unsupported graphs, determinism."""

from __future__ import annotations

import ast
import copy

import pytest
from fusion_cases import (
    ALL,
    AMAX_DIMS_0_2,
    CAPTURE_FAILED,
    const,
    graph,
    inp,
    linear_bias_relu,
    nd,
    node,
    par,
    residual_layer_norm,
    scaled_softmax,
    tensor,
)

from agent.fusion import FusionProgram, compile_graph
from agent.fusion.ir import (
    Term,
    broadcast_terms,
    flat_index,
    parse_graph,
    permuted_terms,
    split_rows,
)
from agent.fusion.plan import plan_graph
from gpu_workers.harness.judge.source_gate import check_sources

TARGETS = ("cpu", "cuda")


def typed(name: str, shape: list[int], dtype: str) -> dict:
    return {**tensor(name, shape), "dtype": dtype}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_plans_the_expected_kernels(case, target):
    program = compile_graph(case.ir, target)
    assert program.unsupported == []
    assert [k.kind for k in program.kernels] == list(case.kinds)
    assert [tuple(k.nodes) for k in program.kernels] == list(case.nodes)
    kernel_file = "kernels/fused.cu" if target == "cuda" else "kernels/fused.cpp"
    assert set(program.files) == {kernel_file, "kernels/fused_binding.cpp", "model_new.py"}
    for kernel in program.kernels:
        # a bare cuBLAS call (CUDA gemm without an epilogue) or cuDNN's convolution has no
        # launch parameter to tune
        library = kernel.kind == "gemm" or "cuDNN" in kernel.description
        assert kernel.tunables or (target == "cuda" and library)
        assert all(kernel.tunables.values())
        assert set(kernel.tunables) <= set(program.launch[kernel.name])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_generated_sources_pass_the_source_gate(case, target):
    program = compile_graph(case.ir, target)
    assert check_sources(program.files) == []
    kernels = program.files["kernels/fused.cu" if target == "cuda" else "kernels/fused.cpp"]
    assert "#include <torch" not in kernels and "#include <ATen" not in kernels
    ast.parse(program.files["model_new.py"])


def test_target_defaults_to_the_graph_device():
    ir = copy.deepcopy(scaled_softmax().ir)
    ir["device"] = "cuda"
    assert "kernels/fused.cu" in compile_graph(ir).files
    ir["device"] = "cpu"
    assert "kernels/fused.cpp" in compile_graph(ir).files


def test_compilation_is_deterministic():
    for case in ALL:
        for target in TARGETS:
            assert compile_graph(case.ir, target).files == compile_graph(case.ir, target).files


def test_model_new_registers_nested_params_and_reads_launch():
    program = compile_graph(residual_layer_norm().ir, "cuda")
    text = program.files["model_new.py"]
    assert "add_module(name, nn.Module())" in text
    assert "get_submodule('norm').register_parameter('weight'" in text
    assert "self.norm.weight" in text and "self.norm.bias" in text
    assert "def forward(self, x, residual):" in text
    name = program.kernels[0].name
    tuned = program.model_new({name: {"threads": 1024}})
    assert f"'{name}': {{'threads': 1024" in tuned
    assert tuned.replace("1024, 'warp", "256, 'warp") == text
    with pytest.raises(KeyError):
        program.model_new({"no_such_kernel": {"threads": 64}})
    with pytest.raises(KeyError):
        program.model_new({name: {"no_such_knob": 1}})


def test_buffers_and_tf32_default():
    ir = linear_bias_relu().ir
    on = compile_graph(ir, "cuda")
    off = compile_graph(ir, "cuda", allow_tf32=False)
    assert on.launch[on.kernels[0].name]["tf32"] == 1
    assert off.launch[off.kernels[0].name]["tf32"] == 0
    assert "CUBLAS_TF32_TENSOR_OP_MATH" in on.files["kernels/fused.cu"]
    assert "register_buffer" not in on.files["model_new.py"]


def test_summary_names_kernels_and_nodes():
    program = compile_graph(linear_bias_relu().ir, "cuda")
    summary = program.summary()
    assert "1 kernel" in summary and "k0_linear [gemm]: fc, relu" in summary
    assert "cuBLAS" in summary


def test_the_planner_alone_refuses_dims_apart_and_the_compiler_splits_them():
    alone = plan_graph(parse_graph(AMAX_DIMS_0_2))
    (reason,) = alone.unsupported
    assert reason.startswith("amax (amax): reduces over dim(s) [0, 2] of [4, 5, 6]")
    program = compile_graph(AMAX_DIMS_0_2, "cuda")
    assert program.unsupported == []
    assert [(k.kind, k.nodes) for k in program.kernels] == [
        ("row_reduction", ["amax.part0"]),  # dim 2 first, keepdim: [4, 5, 1]
        ("axis_reduction", ["amax"]),  # then dims [0, 2] of it: dim 0 is the only wide one
    ]


def test_few_long_rows_are_reduced_in_two_stages_and_many_rows_in_one():
    def total(rows: int, cols: int) -> dict:
        x = tensor("x", [rows, cols])
        return graph([x], [], [node("s", "sum", [inp("x")], [rows], dim=[1])], ["s"])

    staged = compile_graph(total(1, 3 * 1024), "cpu")
    assert [k.nodes for k in staged.kernels] == [["s.partial"], ["s.total", "s"]]
    assert "6 rows x 512" in staged.summary()  # 3072 = 6 parts of 512
    assert len(compile_graph(total(128, 3 * 1024), "cpu").kernels) == 1  # rows enough
    assert len(compile_graph(total(1, 2053), "cpu").kernels) == 1  # a prime length: no parts


def test_a_program_that_cannot_be_generated_says_why():
    program = compile_graph(AMAX_DIMS_0_2 | {"unsupported": ["topk (call_function): no"]}, "cpu")
    assert program.files == {} and program.kernels == []
    assert program.unsupported == ["topk (call_function): no"]
    assert "Cannot generate" in program.summary()
    with pytest.raises(ValueError):
        program.model_new({})


def test_unsupported_entries_in_the_ir_are_passed_on():
    program = compile_graph(CAPTURE_FAILED, "cpu")
    assert program.files == {}
    assert program.unsupported == CAPTURE_FAILED["unsupported"]


@pytest.mark.parametrize(
    "ir, fragment",
    [
        (
            graph(
                [tensor("x", [4, 8])],
                [],
                [{**node("h", "relu", [inp("x")], [4, 8]), "dtype": "float16"}],
                ["h"],
            ),
            "h (relu): dtype float16",
        ),
        (
            graph([tensor("x", [4, 8])], [], [node("c", "conv2d", [inp("x")], [4, 8])], ["c"]),
            "c (conv2d): no kernel template",
        ),
        (
            graph(
                [tensor("a", [8, 4]), tensor("b", [8, 4])],
                [],
                [node("m", "matmul", [inp("a"), inp("b")], [8, 8])],
                ["m"],
            ),
            "inner dims differ",
        ),
        (  # a weight of 3 input channels a group for 4 channels in 2 groups (2 a group)
            graph(
                [tensor("x", [1, 4, 9])],
                [tensor("w", [6, 3, 3], "parameter")],
                [
                    node(
                        "c",
                        "conv",
                        [inp("x"), par("w"), None],
                        [1, 6, 7],
                        kernel_size=[3],
                        groups=2,
                        transposed=False,
                    )
                ],  # fmt: skip
                ["c"],
            ),
            "c (conv): a weight [6, 3, 3] for 4 -> 6 channels in 2 groups",
        ),
        (  # a window of 3 over 9 gives 7 outputs, not 8
            graph(
                [tensor("x", [1, 4, 9])],
                [tensor("w", [6, 4, 3], "parameter")],
                [node("c", "conv", [inp("x"), par("w"), None], [1, 6, 8], kernel_size=[3])],
                ["c"],
            ),
            "8 outputs from 9 (window 3, stride 1, padding 0, dilation 1) where the convolution "
            "gives 7",
        ),
        (
            graph(
                [tensor("x", [4, 8])],
                [],
                [node("n", "layer_norm", [inp("x"), None, None], [4, 8], normalized_shape=[4])],
                ["n"],
            ),
            "normalized_shape [4] is not the trailing dims",
        ),
        (
            graph([tensor("x", [4, 8])], [], [node("v", "reshape", [inp("x")], [32])], ["v"]),
            "computes nothing",
        ),
        (
            graph([tensor("x", [2])], [], [node("c", "add", [const(1), const(2)], [])], ["c"]),
            "reads no input or parameter tensor",
        ),
        (  # an index is read only where it picks
            graph(
                [typed("t", [4], "int64")], [], [node("f", "mul", [inp("t"), const(2)], [4])], ["f"]
            ),  # fmt: skip
            "input t is int64: this op reads float32 or bool",
        ),
        (  # argmax's int64 out is a result, never an operand of float arithmetic
            graph(
                [tensor("x", [4, 8])],
                [],
                [
                    {
                        **node("a", "argmax", [inp("x")], [4], dim=[1], keepdim=False),
                        "dtype": "int64",
                    },
                    node("f", "add", [nd("a"), const(1)], [4], alpha=1),
                ],
                ["f"],
            ),  # fmt: skip
            "node a is int64: this op reads float32 or bool",
        ),
        (
            graph(
                [tensor("x", [4, 8])],
                [],
                [node("a", "argmax", [inp("x")], [4], dim=[1], keepdim=False)],
                ["a"],
            ),
            "a (argmax): dtype float32: this op makes int64",
        ),  # fmt: skip
        (
            graph(
                [tensor("x", [4, 8])],
                [],
                [node("p", "pick", [inp("x"), inp("x")], [4], dim=1)],
                ["p"],
            ),  # fmt: skip
            "input x is float32: this op reads int64",
        ),
        (
            graph(
                [tensor("x", [1, 2, 9])],
                [],
                [
                    node(
                        "p",
                        "max_pool",
                        [inp("x")],
                        [1, 2, 3],
                        kernel_size=[3],
                        stride=[3],
                        padding=[2],
                    )
                ],
                ["p"],
            ),  # fmt: skip
            "a window of 3 (stride 3, padding 2, dilation 1) gives 3 outputs from 9",
        ),
    ],
)
def test_unsupported_nodes_are_named(ir, fragment):
    program = compile_graph(ir, "cuda")
    assert program.files == {}
    assert any(fragment in reason for reason in program.unsupported), program.unsupported


def test_malformed_graph():
    program = compile_graph({"format": "kernelarena.graph/1", "nodes": [{"name": "a"}]})
    assert program.unsupported and program.unsupported[0].startswith("malformed graph")
    bad_ref = graph([], [], [node("a", "relu", [nd("missing")], [2])], ["a"])
    assert "not defined" in compile_graph(bad_ref, "cpu").unsupported[0]


def test_dead_nodes_are_dropped():
    ir = graph(
        [tensor("x", [4, 8])],
        [],
        [
            node("unused", "exp", [inp("x")], [4, 8]),
            node("y", "relu", [inp("x")], [4, 8]),
        ],
        ["y"],
    )
    program = compile_graph(ir, "cpu")
    assert [k.nodes for k in program.kernels] == [["y"]]


def test_residual_output_stays_in_the_row_kernel():
    """h = x + r is both an output and layer_norm's input: one kernel writes both."""
    ir = graph(
        [tensor("x", [16, 64]), tensor("r", [16, 64])],
        [tensor("w", [64])],
        [
            node("h", "add", [inp("x"), inp("r")], [16, 64]),
            node("n", "layer_norm", [nd("h"), par("w"), None], [16, 64], normalized_shape=[64]),
        ],
        ["n", "h"],
    )
    program = compile_graph(ir, "cuda")
    assert [(k.kind, k.nodes) for k in program.kernels] == [("row_reduction", ["h", "n"])]
    binding = program.files["kernels/fused_binding.cpp"]
    assert "return {t_n, t_h};" in binding


def test_a_second_kernel_reads_a_materialised_value():
    """A reduction output broadcast against a tensor it does not come from (column-wise)."""
    ir = graph(
        [tensor("x", [8, 8]), tensor("y", [8, 8])],
        [],
        [
            node("s", "sum", [inp("x")], [8], dim=[1], keepdim=False),
            node("z", "mul", [inp("y"), nd("s")], [8, 8]),
            node("o", "add", [nd("z"), const(1.0)], [8, 8]),
        ],
        ["o"],
    )
    program = compile_graph(ir, "cpu")
    assert [(k.kind, k.nodes) for k in program.kernels] == [
        ("row_reduction", ["s"]),
        ("pointwise", ["z", "o"]),
    ]


def _bool(spec: dict) -> dict:
    return {**spec, "dtype": "bool"}


def test_a_mask_of_leaves_read_by_another_kernel_is_computed_there():
    """`w > 0` on a [8] parameter masks a [4, 8] input: in no kernel of its own (a bool buffer
    is never written); the kernel that reads it compares w itself."""
    ir = graph(
        [tensor("x", [4, 8])],
        [tensor("w", [8], "parameter")],
        [
            _bool(node("m", "gt", [par("w"), const(0.0)], [8])),
            node("y", "where", [nd("m"), inp("x"), const(-1.0)], [4, 8]),
        ],
        ["y"],
    )
    program = compile_graph(ir, "cpu")
    assert [(k.kind, k.nodes) for k in program.kernels] == [("pointwise", ["y"])]
    kernel = next(text for path, text in program.files.items() if path.endswith(".cpp"))
    assert "> 0.0f ? 1.0f : 0.0f" in kernel


@pytest.mark.parametrize(
    ("nodes", "why"),
    [
        ([_bool(node("m", "gt", [inp("x"), const(0.0)], [4, 8]))], "m (gt): a mask"),
        (  # a mask of a computed value, read by the row kernel after it
            [
                node("s", "sum", [inp("x")], [4, 1], dim=[1], keepdim=True),
                _bool(node("m", "gt", [nd("s"), const(0.0)], [4, 1])),
                node("e", "exp", [inp("x")], [4, 8]),
                node("y", "where", [nd("m"), nd("e"), const(0.0)], [4, 8]),
            ],
            "m (gt): a mask",
        ),
    ],
    ids=["returned", "read-by-another-kernel"],
)
def test_a_mask_kept_in_memory_is_refused_by_name(nodes, why):
    ir = graph([tensor("x", [4, 8])], [], nodes, [nodes[-1]["name"]])
    (reason,) = compile_graph(ir, "cpu").unsupported
    assert reason.startswith(why) and "returning it, or reading it in another kernel" in reason


def test_an_int64_arange_returned_is_refused_and_a_float_one_is_written():
    """Kernels compute an arange as a float: returning an int64 one would need an int64 write
    (refused by name); a float32 one is written by a kernel like any value."""
    ramp = {**node("r", "arange", [], [6], start=0.0, step=1.0), "dtype": "int64"}
    (reason,) = compile_graph(graph([tensor("x", [6])], [], [ramp], ["r"]), "cpu").unsupported
    assert reason.startswith("r (arange): an int64 arange or eye") and "returning it" in reason
    # returned and read by another op: computed where read, and written by a kernel too (so is
    # a fill's triangle: known-bad before, the output was in no kernel)
    eye = node("e", "eye", [], [3, 4])
    tri = node("t", "tril", [const(1.0)], [3, 4])
    s = node("s", "sum", [inp("x")], [3, 1], dim=[1], keepdim=True)
    y = node("y", "add", [nd("s"), nd("e")], [3, 4], alpha=1)
    z = node("z", "mul", [nd("y"), nd("t")], [3, 4])
    ir = graph([tensor("x", [3, 4])], [], [eye, tri, s, y, z], ["z", "e", "t"])
    program = compile_graph(ir, "cpu")
    assert [(k.kind, k.nodes) for k in program.kernels] == [
        ("pointwise", ["e", "t"]),
        ("row_reduction", ["s", "y", "z"]),
    ]
    kernel = next(text for path, text in program.files.items() if path.endswith(".cpp"))
    assert "/ 4 == " in kernel and "% 4 ? 1.0f : 0.0f" in kernel


def test_broadcast_terms():
    assert broadcast_terms((256,), (64, 256)) == (Term(1, 256, 1),)
    assert broadcast_terms((64, 256), (64, 256)) == (Term(1, 64 * 256, 1),)
    assert broadcast_terms((64, 1), (64, 256)) == (Term(256, 64, 1),)
    assert broadcast_terms((), (64, 256)) == ()
    assert broadcast_terms((8, 1, 10), (8, 6, 10)) == (Term(60, 8, 10), Term(1, 10, 1))
    assert broadcast_terms((3, 1, 1), (2, 3, 4, 5)) == (Term(20, 3, 1),)
    assert broadcast_terms((5,), (4, 6)) is None
    assert flat_index((Term(60, 8, 10), Term(1, 10, 1)), 480, "i") == "(i / 60) * 10 + i % 10"
    split = split_rows((Term(1, 256, 1),), 64 * 256, 256)
    assert split.col == 1 and split.row_terms == ()


def test_permuted_terms():
    # [2, 3, 4] with dims (2, 0, 1): element (k, i, j) of the [4, 2, 3] result is x[i, j, k]
    terms = permuted_terms((2, 3, 4), (2, 0, 1))
    assert terms == (Term(6, 4, 1), Term(1, 6, 4))  # i and j stay in order: one run
    result = [[[i * 12 + j * 4 + k for j in range(3)] for i in range(2)] for k in range(4)]
    flat = [v for plane in result for row in plane for v in row]
    assert [sum((f // t.div) % t.mod * t.mult for t in terms) for f in range(24)] == flat
    # dims that stay in order merge: a [B, S, H, D] -> [B, H, S, D] keeps D contiguous
    assert permuted_terms((2, 5, 3, 8), (0, 2, 1, 3))[-1] == Term(1, 8, 1)
    assert permuted_terms((2, 3, 4), (0, 1, 2)) == (Term(1, 24, 1),)  # the identity: one run
    # known-bad: a transpose is not a broadcast
    assert permuted_terms((3, 4), (1, 0)) != broadcast_terms((4, 3), (4, 3))


def test_a_permute_that_is_not_a_permutation_is_refused():
    bad = graph(
        [tensor("x", [4, 8])], [], [node("p", "permute", [inp("x")], [8, 4], dims=[1, 1])], ["p"]
    )
    assert any("not a permutation" in r for r in compile_graph(bad, "cpu").unsupported)
    good = graph(
        [tensor("x", [4, 8])], [], [node("p", "permute", [inp("x")], [8, 4], dims=[1, 0])], ["p"]
    )
    assert compile_graph(good, "cpu").unsupported == []


def _matmul_of_permute(dims: list[int], permuted: list[int], also_returned: bool = False) -> dict:
    p = node("p", "permute", [inp("x")], permuted, dims=dims)
    product = node("mm", "matmul", [nd("p"), inp("y")], [*permuted[:-1], 6])
    return graph(
        [tensor("x", [3, 4, 5]), tensor("y", [permuted[-1], 6])],
        [],
        [p, product],
        ["mm", "p"] if also_returned else ["mm"],
    )


@pytest.mark.parametrize("target", TARGETS)
def test_a_gemm_reads_a_transpose_of_the_last_two_dims_as_it_lies(target):
    swapped = compile_graph(_matmul_of_permute([0, 2, 1], [3, 5, 4]), target)
    assert [(k.kind, k.nodes) for k in swapped.kernels] == [("gemm", ["mm"])]
    # returned as well: the transpose is written by a kernel of its own, the GEMM still reads x
    returned = compile_graph(_matmul_of_permute([0, 2, 1], [3, 5, 4], True), target)
    assert sorted(k.kind for k in returned.kernels) == ["gemm", "pointwise"]
    # known-bad: a permute that moves the batch dim is no transpose of a matrix: it is copied
    moved = compile_graph(_matmul_of_permute([1, 0, 2], [4, 3, 5]), target)
    assert [(k.kind, k.nodes) for k in moved.kernels] == [("pointwise", ["p"]), ("gemm", ["mm"])]


def _cat(parts: list[tuple[str, list[int]]], out: list[int], dim: int, **dtypes) -> dict:
    inputs = [{**tensor(n, shape), "dtype": dtypes.get(n, "float32")} for n, shape in parts]
    cat = node("c", "cat", [inp(name) for name, _ in parts], out, dim=dim)
    return graph(inputs, [], [cat], ["c"])


@pytest.mark.parametrize(
    "bad, why",
    [
        (_cat([("a", [2, 3]), ("b", [3, 3])], [2, 6], 1), "input b [3, 3] is not [2, 6] but along"),
        (_cat([("a", [2, 3]), ("b", [2, 3])], [2, 7], 1), "parts of 6 along dim 1, not 7"),
        (_cat([("a", [2, 3]), ("b", [2, 3])], [2, 6], 2), "dim 2 is not a dim of [2, 6]"),
        (_cat([("a", [2, 3]), ("b", [2, 3])], [2, 6], 1, b="int64"), "input b is int64"),
    ],
)
def test_a_cat_whose_parts_do_not_join_is_refused(bad, why):
    assert any(why in reason for reason in compile_graph(bad, "cpu").unsupported), why
    good = _cat([("a", [2, 3]), ("b", [2, 4]), ("e", [2, 0])], [2, 7], 1)
    for target in TARGETS:
        program = compile_graph(good, target)
        assert program.unsupported == [] and len(program.kernels) == 1, program.unsupported


def test_a_slice_past_its_operand_is_refused():
    def sliced(out, starts, steps):
        cut = node("s", "slice", [inp("x")], out, starts=starts, steps=steps)
        return graph([tensor("x", [4, 6])], [], [cut], ["s"])

    # rows 1, 3, 5 of 6 fit; 1, 3, 5, 7 do not, nor do starts that are not one a dim
    assert compile_graph(sliced([4, 3], [0, 1], [1, 2]), "cpu").unsupported == []
    past = compile_graph(sliced([4, 4], [0, 1], [1, 2]), "cpu").unsupported
    assert any("dim 1: 4 from 1 by 2 is not within 6" in r for r in past), past
    short = compile_graph(sliced([4, 3], [1], [2]), "cpu").unsupported
    assert any("are not one a dim of [4, 6]" in r for r in short), short


def test_a_slice_of_an_input_is_recomputed_under_a_mask_alone():
    """Known-bad: recomputed wherever it was read, x[:, -1] (a slice, then the reshape that
    drops its dim) read by a GEMM was refused as "a reshape of the mask"; it is materialised."""
    cut = node("s", "slice", [inp("x")], [4, 1, 5], starts=[0, 5, 0], steps=[1, 1, 1])
    last = node("last", "reshape", [nd("s")], [4, 5], shape=[4, 5])
    fc = node("fc", "linear", [nd("last"), par("w"), None], [4, 3])
    inputs, params = [tensor("x", [4, 6, 5])], [tensor("w", [3, 5], "parameter")]
    program = compile_graph(graph(inputs, params, [cut, last, fc], ["fc"]), "cpu")
    assert program.unsupported == [] and [k.kind for k in program.kernels] == ["pointwise", "gemm"]


def test_program_type():
    assert isinstance(compile_graph(scaled_softmax().ir, "cpu"), FusionProgram)


@pytest.mark.parametrize("cube_rows, kernels", [(64, 1), (1, 3)])
def test_a_pointwise_node_of_inputs_alone_joins_the_last_group_over_as_many_elements(
    cube_rows, kernels
):
    """KernelBench 88 (MinGPTNewGelu): 0.5 * x, then x ** 3 ... and a product of both. The cube
    reads only an input, so it joins 0.5 * x's group: one kernel, where it used to start one of
    its own that read back 0.5 * x from memory (40% of the speed of light on the H200). Over
    another element count (a row broadcast to the product) it still starts its own, and so does
    the product, which reads it."""
    x, z = tensor("x", [64, 16]), tensor("z", [cube_rows, 16])
    steps = [
        node("half", "mul", [const(0.5), inp("x")], [64, 16]),
        node("cube", "pow", [inp("z"), const(3.0)], [cube_rows, 16]),
        node("y", "mul", [nd("half"), nd("cube")], [64, 16]),
    ]
    program = compile_graph(graph([x, z], [], steps, ["y"]), "cuda")
    assert program.unsupported == []
    assert len(program.kernels) == kernels
