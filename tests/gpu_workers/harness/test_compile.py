import os
import uuid

import pytest

from gpu_workers.harness import compile, settings, workspace
from tests.conftest import candidate_dir


@pytest.fixture
def ws(tmp_path):
    ws = workspace.create(tmp_path / "ws", "class Model: ...", "cpu")
    workspace.copy_candidate(ws, candidate_dir("cpu", "good_relu_scale"))
    return ws


def test_an_unchanged_workspace_is_cached_and_one_changed_file_rebuilds_alone(ws):
    first = compile.build(ws, "cpu")
    assert first.ok, first.log
    again = compile.build(ws, "cpu")
    assert again.ok and again.cached and again.extension_dir == first.extension_dir
    objects_before = set((settings.cache_dir() / "objects").iterdir())
    kernel = next(p for p in ws.kernel_files(".cpp") if not p.stem.endswith("_binding"))
    ws.write_file(f"kernels/{kernel.name}", kernel.read_text() + f"\n// {uuid.uuid4()}\n")
    warm = compile.build(ws, "cpu")
    assert warm.ok and not warm.cached and warm.extension_dir != first.extension_dir
    new_objects = set((settings.cache_dir() / "objects").iterdir()) - objects_before
    assert len(new_objects) == 1  # only the edited file was compiled


def test_errors_are_trimmed_to_file_and_line(ws):
    ws.write_file("kernels/broken.cpp", "int ok = 1;\nint broken = ;\n")
    result = compile.build(ws, "cpu")
    assert not result.ok
    assert "kernels/broken.cpp:2" in result.log
    assert str(ws.root) not in result.log and len(result.log) < 4100


def test_an_empty_kernels_dir_says_what_to_write(tmp_path):
    ws = workspace.create(tmp_path / "ws", "class Model: ...", "cpu")
    result = compile.build(ws, "cpu")
    assert not result.ok and "kernels/ is empty" in result.log


def test_trim_log_keeps_the_first_errors():
    log = "\n".join(f"/w/kernels/a.cpp:{i}:1: error: bad {i}" for i in range(1, 40))
    trimmed = compile.trim_log(log, root=__import__("pathlib").Path("/w"))
    assert "kernels/a.cpp:1:1: error: bad 1" in trimmed and "bad 39" not in trimmed


def test_an_include_of_a_harness_file_fails(ws):
    harness_file = settings.REPO_ROOT / "gpu_workers" / "harness" / "protocol.py"
    assert harness_file.is_file()  # known-bad: it is there for any process outside the sandbox
    ws.write_file("kernels/leak.cpp", f'#include "{harness_file}"\nint leak = 0;\n')
    result = compile.build(ws, "cpu")
    assert not result.ok
    assert "kernels/leak.cpp:1" in result.log and "No such file or directory" in result.log


def test_an_include_of_a_cache_file_fails(ws):
    cached = settings.cache_dir() / f"planted-{uuid.uuid4().hex}.h"
    cached.write_text("#pragma once\nconstexpr int planted = 1;\n")
    # known-bad: the same header inside the workspace compiles
    ws.write_file("kernels/planted.h", cached.read_text())
    ws.write_file("kernels/leak.cpp", '#include "kernels/planted.h"\nint leak = planted;\n')
    assert compile.build(ws, "cpu").ok
    ws.write_file("kernels/leak.cpp", f'#include "{cached}"\nint leak = planted;\n')
    result = compile.build(ws, "cpu")
    cached.unlink()
    assert not result.ok
    assert "kernels/leak.cpp:1" in result.log and "No such file or directory" in result.log


def test_a_source_that_includes_an_endless_file_fails_on_its_memory_limit(ws):
    """`#include "/dev/zero"` (a device the sandbox shows) grows the compiler without end; each
    compiler process may map only its share of the machine's memory, so it fails alone."""
    ws.write_file("kernels/endless.cpp", '#include "/dev/zero"\nint endless = 0;\n')
    result = compile.build(ws, "cpu")
    assert not result.ok
    assert "out of memory" in result.log, result.log
    # known-bad: the include itself resolves (the file is there, unlike the harness's files)
    assert "No such file or directory" not in result.log


def test_a_compiler_may_map_its_share_of_the_machines_memory():
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    share = compile._memory_per_job(os.cpu_count() or 1)
    assert 2 << 30 <= share <= 16 << 30 and share < total
