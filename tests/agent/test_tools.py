"""The tools on a real workspace, and the summaries a model reads."""

from __future__ import annotations

import pytest

from agent.tools import (
    MAX_ERROR_LINES,
    TOOL_NAMES,
    TOOLS,
    ToolCallError,
    check_arguments,
    first_errors,
    run_tool,
    summarise_compile,
    summarise_profile,
    summarise_verify,
)


def test_every_tool_has_an_openai_schema():
    assert TOOL_NAMES == [
        "list_files",
        "read_file",
        "write_file",
        "edit_file",
        "inspect_graph",
        "compile",
        "verify",
        "profile",
        "tune",
        "finish",
    ]
    for tool in TOOLS:
        assert tool["type"] == "function"
        assert tool["function"]["parameters"]["type"] == "object"
        assert set(tool["function"]["parameters"]["required"]) <= set(
            tool["function"]["parameters"]["properties"]
        )


def test_edit_file_replaces_one_exact_occurrence(session):
    session.write_file("model_new.py", "a = 1\nb = 2\nb = 2\n")
    result = run_tool(
        session, "edit_file", {"path": "model_new.py", "old_text": "a = 1", "new_text": "a = 3"}
    )
    assert result.ok and session.read_file("model_new.py") == "a = 3\nb = 2\nb = 2\n"


@pytest.mark.parametrize("old_text,says", [("c = 9", "not found"), ("b = 2", "found 2 times")])
def test_edit_file_changes_nothing_unless_the_text_is_unique(session, old_text, says):
    session.write_file("model_new.py", "a = 1\nb = 2\nb = 2\n")
    result = run_tool(
        session, "edit_file", {"path": "model_new.py", "old_text": old_text, "new_text": "x"}
    )
    assert not result.ok and says in result.text
    assert session.read_file("model_new.py") == "a = 1\nb = 2\nb = 2\n"


def test_read_file_pages_long_files(session):
    session.write_file("model_new.py", "".join(f"# line {i}\n" for i in range(1, 501)))
    first = run_tool(session, "read_file", {"path": "model_new.py"}).text
    assert first.splitlines()[0] == "# line 1"
    assert first.endswith("[lines 1-400 of 500; read_file with start_line=401]")
    rest = run_tool(session, "read_file", {"path": "model_new.py", "start_line": 401}).text
    assert rest.splitlines()[0] == "# line 401" and rest.splitlines()[-1] == "# line 500"


def test_list_and_missing_files(session):
    assert "model.py" in run_tool(session, "list_files", {}).text.splitlines()
    missing = run_tool(session, "read_file", {"path": "kernels/none.cpp"})
    assert not missing.ok and missing.text.startswith("Error:")


def test_arguments_are_checked_against_the_schema():
    check_arguments("write_file", {"path": "model_new.py", "content": ""})
    for name, arguments in [
        ("nope", {}),
        ("write_file", {"path": "x"}),
        ("read_file", {"path": "x", "start_line": "3"}),
        ("read_file", {"path": "x", "start_line": True}),
        ("compile", {"fast": True}),
    ]:
        with pytest.raises(ToolCallError):
            check_arguments(name, arguments)


GCC_LOG = """\
[1/3] c++ -MMD -MF kernels/relu.o.d -c /tmp/kernelarena-x1/workspace/kernels/relu.cpp -o relu.o
FAILED: relu.o
/tmp/kernelarena-x1/workspace/kernels/relu.cpp: In function 'void relu(const float*, float*)':
/tmp/kernelarena-x1/workspace/kernels/relu.cpp:7:5: error: 'y' was not declared in this scope
    7 |     y[i] = x[i];
      |     ^
ninja: build stopped: subcommand failed.
"""


def test_compile_failures_show_the_first_errors_at_workspace_paths():
    text = summarise_compile({"ok": False, "seconds": 3.21, "cached": False, "log": GCC_LOG})
    assert text.startswith("compile: FAILED (3.2 s)")
    assert "kernels/relu.cpp:7:5: error: 'y' was not declared in this scope" in text
    assert "    7 |     y[i] = x[i];" in text
    assert "/tmp/" not in text and "ninja" not in text


def test_many_errors_are_cut_with_a_note():
    log = "".join(f'kernels/k.cu({i}): error: identifier "v{i}" is undefined\n' for i in range(30))
    text = first_errors(log)
    assert text.count("error:") == MAX_ERROR_LINES
    assert text.endswith(f"[30 errors in all; the first {MAX_ERROR_LINES} shown]")


def test_a_log_without_located_errors_keeps_its_tail():
    log = "x" * 10_000 + "\nundefined symbol: relu_launch"
    text = first_errors(log)
    assert text.endswith("undefined symbol: relu_launch") and "earlier characters cut" in text


def test_verdicts_read_in_one_line():
    assert summarise_compile({"ok": True, "seconds": 0.01, "cached": True}) == (
        "compile: OK (0.0 s, cached)"
    )
    passed = {
        "ok": True,
        "trials": 5,
        "max_abs_err": 1.2e-7,
        "max_rel_err": 3e-8,
        "violations": [],
        "error": None,
    }
    assert summarise_verify(passed) == (
        "verify: PASSED (5 trials, max_abs_err 1.2e-07, max_rel_err 3e-08)"
    )
    profiled = {
        "ok": True,
        "eager_ms": 0.8,
        "compile_ms": 0.5,
        "candidate_ms": 0.4,
        "speedup_vs_eager": 2.0,
        "speedup_vs_compile": 1.25,
        "sol_ms": 0.1,
        "sol_fraction": 0.25,
        "spread": 0.004,
        "violations": [],
    }
    assert summarise_profile(profiled) == (
        "profile: candidate 0.4 ms | eager 0.8 ms (2.00x) | torch.compile 0.5 ms (1.25x) | "
        "speed of light 0.1 ms (25% of it) | "
        "spread 0.4% (interquartile range of its times / median)"
    )


def test_failed_verdicts_list_violations_and_errors():
    verdict = {
        "ok": False,
        "trials": 0,
        "max_abs_err": None,
        "max_rel_err": None,
        "violations": [{"code": "torch_op", "detail": "aten::relu in forward"}],
        "error": "compile failed: " + GCC_LOG,
    }
    text = summarise_verify(verdict)
    assert text.splitlines()[0] == "verify: FAILED (max_abs_err n/a, max_rel_err n/a)"
    assert "- torch_op: aten::relu in forward" in text
    assert "kernels/relu.cpp:7:5: error" in text and "/tmp/" not in text
    failed = summarise_profile({"ok": False, "violations": [], "error": "not profiled"})
    assert failed == "profile: FAILED\nnot profiled"
