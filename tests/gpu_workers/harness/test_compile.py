import ast
import os
import shutil
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpu_workers.harness import settings
from gpu_workers.harness.build import cache as compile_cache
from gpu_workers.harness.build import compile, workspace
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
    # the objects the workspace's sources are now built from: the cache's others may be new
    # too, published meanwhile by builds of other tests (xdist workers share the cache)
    plan = compile._plan(ws, "cpu", compile.toolchain("cpu"))
    assert not plan.pending()  # every source has its object in the cache
    new_objects = {compile_cache.object_path(key) for key in plan.cached.values()} - objects_before
    assert len(new_objects) == 1  # only the edited file was compiled


def test_the_same_sources_built_at_once_compile_once(tmp_path):
    """Two processes (parallel tests, a re-grade beside a run) building the same sources: one
    compiles, the other waits for it and links its objects. Known-bad, without the build lock:
    both compiled, each saying cached=False."""
    mark = f"\n// {uuid.uuid4()}\n"
    spaces = []
    for name in ("one", "two"):
        space = workspace.create(tmp_path / name, "class Model: ...", "cpu")
        workspace.copy_candidate(space, candidate_dir("cpu", "good_relu_scale"))
        kernel = next(p for p in space.kernel_files(".cpp") if not p.stem.endswith("_binding"))
        space.write_file(f"kernels/{kernel.name}", kernel.read_text() + mark)
        spaces.append(space)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda space: compile.build(space, "cpu"), spaces))
    assert all(r.ok for r in results), [r.log for r in results]
    assert sorted(r.cached for r in results) == [False, True]
    assert results[0].extension_dir == results[1].extension_dir


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
    harness_file = settings.REPO_ROOT / "gpu_workers" / "harness" / "judge" / "protocol.py"
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


# ---- a cache that could serve the wrong binary (docs/verification.md, row 13) -------------------

PUBLISHED_IMPL = """static inline float relu_scale_one(float v, float scale) {
  return (v > 0.0f ? v : 0.0f) * scale;
}
"""
RELU_SCALE_OF = """import sys, torch
sys.path.insert(0, sys.argv[1])
import kernel_ext
print(kernel_ext.relu_scale_forward(torch.tensor([-1.0, 2.0]), 1.5).tolist())
"""


def relu_scale_of(built: compile.CompileResult) -> list[float]:
    """What the built extension computes for relu([-1, 2]) * 1.5, in a process of its own (two
    extensions of one name do not load into one process)."""
    shown = subprocess.run(
        [sys.executable, "-c", RELU_SCALE_OF, built.extension_dir],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return ast.literal_eval(shown.stdout.strip())


def unique(ws, rel: str) -> None:
    """Appends a comment no earlier run wrote, so the first build below compiles this file."""
    (ws.root / rel).write_text((ws.root / rel).read_text() + f"\n// {uuid.uuid4()}\n")


def test_a_fork_that_edits_only_an_included_source_gets_its_own_binary(tmp_path):
    """attack_stale_include: relu_scale.cpp is byte-identical to the published solution's and
    #includes relu_scale_impl.cpp, a non-header file; the fork changed only that file, to write
    zeros. Its build must compile it afresh and compute zeros, so verification fails."""
    ws = workspace.create(tmp_path / "ws", "class Model: ...", "cpu")
    workspace.copy_candidate(ws, candidate_dir("cpu", "attack_stale_include"))
    unique(ws, "kernels/relu_scale.cpp")
    fork_impl = ws.read_file("kernels/relu_scale_impl.cpp")
    ws.write_file("kernels/relu_scale_impl.cpp", PUBLISHED_IMPL)
    published = compile.build(ws, "cpu")
    assert published.ok, published.log
    assert relu_scale_of(published) == [0.0, 3.0]
    ws.write_file("kernels/relu_scale_impl.cpp", fork_impl)
    fork = compile.build(ws, "cpu")
    assert fork.ok and not fork.cached, fork.log
    assert fork.extension_dir != published.extension_dir
    assert relu_scale_of(fork) == [0.0, 0.0]  # the fork's own (wrong) code: verify fails
    ws.write_file("kernels/relu_scale_impl.cpp", PUBLISHED_IMPL)
    again = compile.build(ws, "cpu")  # known-good: the published sources are a cache hit again
    assert again.cached and again.extension_dir == published.extension_dir


@pytest.mark.parametrize("included", ["relu_scale_impl.inc", "relu_scale_impl.cu", "sub/impl.h"])
def test_every_file_the_compiler_read_is_in_the_key(tmp_path, included):
    """Any file of the workspace that a source #includes counts, whatever its suffix or folder
    (a subfolder is written here directly: an agent's write_file makes none)."""
    ws = workspace.create(tmp_path / "ws", "class Model: ...", "cpu")
    workspace.copy_candidate(ws, candidate_dir("cpu", "attack_stale_include"))
    source = ws.root / "kernels" / "relu_scale.cpp"
    source.write_text(source.read_text().replace("relu_scale_impl.cpp", included))
    (ws.root / "kernels" / "relu_scale_impl.cpp").unlink()
    impl = ws.root / "kernels" / included
    impl.parent.mkdir(exist_ok=True)
    impl.write_text(PUBLISHED_IMPL)
    unique(ws, "kernels/relu_scale.cpp")
    published = compile.build(ws, "cpu")
    assert published.ok and relu_scale_of(published) == [0.0, 3.0], published.log
    impl.write_text(PUBLISHED_IMPL.replace("(v > 0.0f ? v : 0.0f) * scale", "0.0f * v * scale"))
    fork = compile.build(ws, "cpu")
    assert fork.ok and not fork.cached, fork.log
    assert relu_scale_of(fork) == [0.0, 0.0]


def test_an_included_file_that_is_gone_or_now_shadowed_is_a_miss(tmp_path):
    """The object's include resolving to another file, or a file now present that the source
    only asked about (__has_include), must rebuild it; a missing one must fail the build."""
    ws = workspace.create(tmp_path / "ws", "class Model: ...", "cpu")
    workspace.copy_candidate(ws, candidate_dir("cpu", "attack_stale_include"))
    source = ws.root / "kernels" / "relu_scale.cpp"
    optional = (
        '#if __has_include("zero.h")\n#include "zero.h"\n'
        '#else\n#include "relu_scale_impl.cpp"\n#endif\n'
    )
    source.write_text(source.read_text().replace('#include "relu_scale_impl.cpp"\n', optional))
    ws.write_file("kernels/relu_scale_impl.cpp", PUBLISHED_IMPL)
    unique(ws, "kernels/relu_scale.cpp")
    published = compile.build(ws, "cpu")
    assert published.ok and relu_scale_of(published) == [0.0, 3.0], published.log
    zero = PUBLISHED_IMPL.replace("(v > 0.0f ? v : 0.0f) * scale", "0.0f * v * scale")
    ws.write_file("kernels/zero.h", zero)
    shadowed = compile.build(ws, "cpu")
    assert shadowed.ok and not shadowed.cached, shadowed.log
    assert relu_scale_of(shadowed) == [0.0, 0.0]
    (ws.root / "kernels" / "zero.h").unlink()
    (ws.root / "kernels" / "relu_scale_impl.cpp").unlink()
    gone = compile.build(ws, "cpu")
    assert not gone.ok and "relu_scale_impl.cpp" in gone.log


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_nvccs_dependency_file_names_the_included_cu_file(tmp_path):
    """The cuda target's compiles (compile only: no GPU needed) report what they read as g++'s
    do: the included .cu file, the workspace header, not the toolchain's headers."""
    root = tmp_path / "ws"
    shutil.copytree(candidate_dir("cuda", "attack_stale_include"), root)
    (root / "binding_registry.h").write_text("#pragma once\n")
    source = root / "kernels" / "relu_scale.cu"
    source.write_text('#include "../binding_registry.h"\n' + source.read_text())
    obj = tmp_path / "build dir" / "relu_scale.o"  # a space, escaped in the .d file
    obj.parent.mkdir()
    argv = ["nvcc", "-std=c++17", f"-I{root}", "-MD", "-MF", f"{obj}.d", "-c", str(source)]
    subprocess.run([*argv, "-o", str(obj)], check=True, capture_output=True, timeout=300)
    files = compile_cache.snapshot(root)
    found = compile_cache.dependencies(Path(f"{obj}.d"), obj, root, files)
    assert found == ["binding_registry.h", "kernels/relu_scale.cu", "kernels/relu_scale_impl.cu"]
    del files["kernels/relu_scale_impl.cu"]  # known-bad: a file it read that the snapshot lacks
    assert compile_cache.dependencies(Path(f"{obj}.d"), obj, root, files) is None


def _cudnn_tree(root: Path, header: bool, library: str | None) -> tuple[Path, Path]:
    include, lib = root / "include", root / "lib"
    include.mkdir(parents=True)
    lib.mkdir()
    if header:
        (include / "cudnn.h").write_text("#pragma once\n")
    if library:
        (lib / library).write_bytes(b"\x7fELF")
    return include, lib


def test_cudnn_is_found_where_its_header_and_library_lie_together(tmp_path):
    """pip's nvidia-cudnn package ships libcudnn.so.9 alone: that file is linked by name, and
    only into an extension that calls it."""
    header_only = _cudnn_tree(tmp_path / "a", header=True, library=None)
    library_only = _cudnn_tree(tmp_path / "b", header=False, library="libcudnn.so.9")
    both = _cudnn_tree(tmp_path / "c", header=True, library="libcudnn.so.9")
    found = compile.find_cudnn([header_only, library_only, both])
    assert found is not None and found.include == both[0]
    assert found.cuda_flags() == ["-DKA_HAVE_CUDNN=1", "-isystem", str(both[0])]
    assert "-l:libcudnn.so.9" in found.ldflags() and "-Wl,--as-needed" in found.ldflags()
    assert compile.find_cudnn([header_only, library_only]) is None
