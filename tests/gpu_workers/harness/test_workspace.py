import pytest

from gpu_workers.harness.build import workspace


@pytest.fixture
def ws(tmp_path):
    return workspace.create(tmp_path / "ws", "class Model: ...", "cpu")


def test_it_lays_out_the_cuda_agent_workspace(ws):
    assert ws.list_files() == [
        "SKILL.md",
        "binding.cpp",
        "binding_registry.h",
        "model.py",
        "model_new.py",
    ]
    assert ws.read_file("model.py") == "class Model: ..."


@pytest.mark.parametrize("path", ["SKILL.md", "model.py", "binding.cpp", "binding_registry.h"])
def test_read_only_files_cannot_be_written(ws, path):
    with pytest.raises(PermissionError, match="read-only"):
        ws.write_file(path, "x")
    assert ws.read_file(path) != "x"


@pytest.mark.parametrize("path", ["../escape.py", "/etc/passwd", "kernels/../../x.cpp"])
def test_paths_outside_the_workspace_are_refused(ws, path):
    with pytest.raises(ValueError, match="outside the workspace"):
        ws.write_file(path, "x")


@pytest.mark.parametrize("path", ["notes.txt", "kernels/sub/x.cpp", "kernels/x.cu", "setup.py"])
def test_only_kernel_sources_and_model_new_are_writable(ws, path):
    with pytest.raises(ValueError, match="cannot be written"):
        ws.write_file(path, "x")


@pytest.mark.parametrize(
    ("content", "fault"),
    [
        ("int x;\n\x00", "contains a NUL character \\(line 2\\)"),
        ("// \ud800", "not valid UTF-8 text"),
        ("/" * (512 * 1024 + 1), "a file may be at most 524,288 bytes"),
    ],
    ids=["NUL", "lone surrogate", "too large"],
)
def test_only_source_text_is_written(ws, content, fault):
    ws.write_file("kernels/op.cpp", "int x;")
    with pytest.raises(ValueError, match=fault):
        ws.write_file("kernels/op.cpp", content)
    assert ws.read_file("kernels/op.cpp") == "int x;"  # what was there is kept


def test_sources_are_what_the_agent_wrote(ws):
    ws.write_file("kernels/op.cpp", "int x;")
    ws.write_file("model_new.py", "class ModelNew: ...")
    assert ws.sources() == {"model_new.py": "class ModelNew: ...", "kernels/op.cpp": "int x;"}


def test_copy_candidate_refuses_a_dir_without_model_new(ws, tmp_path):
    (tmp_path / "cand").mkdir()
    with pytest.raises(ValueError, match="no model_new.py"):
        workspace.copy_candidate(ws, tmp_path / "cand")
