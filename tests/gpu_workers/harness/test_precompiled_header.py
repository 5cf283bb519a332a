import fcntl
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpu_workers.harness import settings
from gpu_workers.harness.build import compile, precompiled_header, workspace
from tests.conftest import candidate_dir


@pytest.fixture
def ws(tmp_path):
    ws = workspace.create(tmp_path / "ws", "class Model: ...", "cpu")
    workspace.copy_candidate(ws, candidate_dir("cpu", "good_relu_scale"))
    return ws


def _touch_binding(ws) -> None:
    binding = next(p for p in ws.kernel_files(".cpp") if p.stem.endswith("_binding"))
    ws.write_file(f"kernels/{binding.name}", binding.read_text() + f"\n// {uuid.uuid4()}\n")


def test_binding_files_compile_against_the_prelude_built_once_for_the_toolchain(ws):
    _touch_binding(ws)
    assert compile.build(ws, "cpu").ok
    chain = compile.toolchain("cpu")
    built = settings.cache_dir() / "pch" / chain.digest() / precompiled_header.PRELUDE
    assert built.is_file() and built.with_suffix(".h.gch").stat().st_size > 1 << 20
    stamp = built.with_suffix(".h.gch").stat().st_mtime_ns
    _touch_binding(ws)
    assert compile.build(ws, "cpu").ok
    assert built.with_suffix(".h.gch").stat().st_mtime_ns == stamp  # reused, not rebuilt


def test_a_gch_of_other_flags_is_ignored_and_the_build_still_works(ws, monkeypatch):
    """GCC parses the header itself when the .gch does not match: time lost, nothing wrong."""
    chain = compile.toolchain("cpu")
    key = chain.digest()
    assert precompiled_header.prelude(chain.cxx, chain.cflags, key, "cpu", 4 << 30)
    # NDEBUG changes what <cassert> defines, so GCC refuses the .gch built without it
    foreign = compile.Toolchain(chain.cxx, None, (*chain.cflags, "-DNDEBUG"), (), chain.ldflags)
    monkeypatch.setattr(compile, "toolchain", lambda device: foreign)
    monkeypatch.setattr(foreign.__class__, "digest", lambda self: key)  # finds the other .gch
    _touch_binding(ws)
    result = compile.build(ws, "cpu")
    assert result.ok, result.log


def test_plain_kernel_files_are_not_given_torch():
    assert precompiled_header.uses_torch("#include <torch/types.h>\nint x;\n")
    assert precompiled_header.uses_torch('  #  include "ATen/ATen.h"\n')
    assert not precompiled_header.uses_torch('#include <cstdint>\nextern "C" void f();\n')
    assert not precompiled_header.uses_torch("// see torch/types.h\n")


def test_a_toolchain_that_cannot_build_it_is_remembered_and_compiles_without(tmp_path, monkeypatch):
    broken = ("-fno-such-flag-kernelarena",)
    key = f"broken-{uuid.uuid4()}"
    assert precompiled_header.prelude("c++", broken, key, "cpu", 4 << 30) is None
    failed = settings.cache_dir() / "pch" / f"{key}.failed"
    assert "no-such-flag" in failed.read_text()
    build = precompiled_header._build
    builds = []  # the builds tried, by key (a time would tell them apart only on a quiet host)
    monkeypatch.setattr(
        precompiled_header, "_build", lambda *args: builds.append(args[2]) or build(*args)
    )
    assert precompiled_header.prelude("c++", broken, key, "cpu", 4 << 30) is None
    assert builds == []  # not tried again
    # known-bad: a key with no failure on record does try (and fails the same way)
    assert precompiled_header.prelude("c++", broken, f"{key}-new", "cpu", 4 << 30) is None
    assert builds == [f"{key}-new"]
    assert (settings.cache_dir() / "pch" / f"{key}-new.failed").is_file()


@pytest.fixture
def cache_of_its_own(tmp_path, monkeypatch):
    """A compile cache of the test's own, holding a copy of the shared cache's prelude (built
    there first if need be): what the test damages and gives up, no build of another test sees.
    Known-bad, the shared one damaged in place: a build of another xdist worker meanwhile read
    the truncated .gch, or lost the prelude as it was removed and copied back."""
    chain = compile.toolchain("cpu")
    shared = precompiled_header.prelude(chain.cxx, chain.cflags, chain.digest(), "cpu", 4 << 30)
    assert shared
    own = tmp_path / "cache"
    shutil.copytree(shared.parent, own / "pch" / chain.digest())
    monkeypatch.setenv("KERNELARENA_CACHE", str(own))
    return own


def test_a_damaged_gch_costs_one_rebuild_and_is_given_up(ws, cache_of_its_own):
    chain = compile.toolchain("cpu")
    key = chain.digest()
    gch = cache_of_its_own / "pch" / key / f"{precompiled_header.PRELUDE}.gch"
    assert precompiled_header.prelude(chain.cxx, chain.cflags, key, "cpu", 4 << 30) == (
        gch.with_suffix("")
    )
    with open(gch, "r+b") as damaged:
        damaged.truncate(1 << 20)  # GCC errors on a truncated one
    _touch_binding(ws)
    result = compile.build(ws, "cpu")
    assert result.ok, result.log
    failed = cache_of_its_own / "pch" / f"{key}.failed"
    assert "while reading precompiled header" in failed.read_text()  # the first try's error
    assert not gch.exists()


def test_a_source_that_names_the_error_cannot_switch_the_prelude_off(ws):
    ws.write_file(
        "kernels/loud_binding.cpp",
        "#include <torch/types.h>\n#error while reading precompiled header\n",
    )
    result = compile.build(ws, "cpu")
    assert not result.ok and "#error while reading precompiled header" in result.log
    key = compile.toolchain("cpu").digest()
    assert not (settings.cache_dir() / "pch" / f"{key}.failed").exists()
    assert not precompiled_header.refused(result.log)
    # known-bad: the compiler's own refusal is told apart
    assert precompiled_header.refused("cc1plus: error: while reading precompiled header: x\n")


def test_a_build_that_starts_while_another_runs_waits_and_takes_its_header():
    """Builds that start together (a batch of candidates, two workers) make the header once."""
    key = f"shared-{uuid.uuid4()}"
    root = settings.cache_dir() / "pch"
    root.mkdir(exist_ok=True)
    with open(root / f"{key}.lock", "w") as held, ThreadPoolExecutor(1) as pool:
        fcntl.flock(held, fcntl.LOCK_EX)  # a build of this toolchain under way
        waiting = pool.submit(precompiled_header.prelude, "c++", (), key, "cpu", 4 << 30)
        time.sleep(0.5)
        # known-bad for the lock: without it, this call fails its own build (no include paths)
        # within the half second
        assert not waiting.done()
        (root / key).mkdir()
        (root / key / precompiled_header.PRELUDE).write_text("// published by the other build\n")
        fcntl.flock(held, fcntl.LOCK_UN)
        assert waiting.result(timeout=10) == root / key / precompiled_header.PRELUDE
