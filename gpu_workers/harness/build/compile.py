"""Builds binding.cpp plus kernels/ into one extension module (`kernel_ext`) with ninja.

Objects are cached by everything the compiler read (compile_cache: the source, every workspace
file it included, the workspace's file list, flags, toolchain), so an unchanged workspace never
rebuilds, a change to one .cu recompiles that file and what includes it, and candidates that
share a binding file (and what it reads) share its object; a C++ file that includes torch
compiles against a precompiled prelude of its headers (precompiled_header). The compiler runs in
the sandbox, since sources are untrusted: it sees the toolchain, the workspace and the cached
objects it links, so an #include of any other file (the harness, the cache, another run) fails.
"""

from __future__ import annotations

import fcntl
import functools
import os
import re
import shutil
import sysconfig
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.build import cache as compile_cache
from gpu_workers.harness.build import precompiled_header
from gpu_workers.harness.build.workspace import Workspace
from gpu_workers.harness.judge import environment, gpu_lock
from gpu_workers.harness.sandbox import launch as sandbox

LIBRARY_FILE = f"{settings.EXTENSION_NAME}.so"


@dataclass
class CompileResult:
    ok: bool
    seconds: float
    cached: bool
    log: str
    extension_dir: str | None = None

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
            "log": self.log,
        }


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    nvcc: str | None
    cflags: tuple[str, ...]
    cuda_flags: tuple[str, ...]
    ldflags: tuple[str, ...]

    def digest(self) -> str:
        return compile_cache.key_of(repr(self), _torch_version())


def _torch_version() -> str:
    import torch

    return f"{torch.__version__}+{torch.version.cuda}"


@functools.cache
def toolchain(device: str) -> Toolchain:
    import torch
    from torch.utils import cpp_extension

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    includes = [*_torch_includes(device), sysconfig.get_paths()["include"]]
    defines = [
        f"-DTORCH_EXTENSION_NAME={settings.EXTENSION_NAME}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *_pybind_abi_flags(cpp_extension),
    ]
    isystem = [flag for path in includes for flag in ("-isystem", path)]
    cflags = ["-O3", "-std=c++17", "-fPIC", "-w", *defines, *isystem]
    lib_dirs = cpp_extension.library_paths()
    ldflags = ["-shared", *(f"-L{d}" for d in lib_dirs), "-lc10", "-ltorch", "-ltorch_cpu"]
    ldflags.append("-ltorch_python")
    if device == "cpu":
        return Toolchain(
            cxx=os.environ.get("CXX", "c++"),
            nvcc=None,
            cflags=(*cflags, "-fopenmp"),
            cuda_flags=(),
            ldflags=(*ldflags, "-fopenmp"),
        )
    cuda_home = cpp_extension.CUDA_HOME or "/usr/local/cuda"
    cuda_lib = os.path.join(cuda_home, "lib64")
    cuda_flags = ["-O3", "-std=c++17", "--compiler-options", "-fPIC", "-lineinfo", *_arch_flags()]
    cuda_flags += ["--expt-relaxed-constexpr", *defines, *isystem]
    ldflags += [f"-L{cuda_lib}", f"-Wl,-rpath,{cuda_lib}", "-lcudart", "-lcublas"]
    cudnn = find_cudnn(_cudnn_candidates(cuda_home))
    if cudnn is not None:
        cuda_flags += cudnn.cuda_flags()
        ldflags += cudnn.ldflags()
    ldflags += ["-lc10_cuda", "-ltorch_cuda"]
    return Toolchain(
        cxx=os.environ.get("CXX", "c++"),
        nvcc=os.path.join(cuda_home, "bin", "nvcc"),
        cflags=tuple(cflags),
        cuda_flags=tuple(cuda_flags),
        ldflags=tuple(ldflags),
    )


@dataclass(frozen=True)
class Cudnn:
    """Where cuDNN's headers and library are: sources test KA_HAVE_CUDNN for whether they may
    call it (the fusion compiler's convolutions do, with a direct kernel where it is missing)."""

    include: Path
    lib: Path
    library: str  # the file name linked, e.g. libcudnn.so.9 (pip's wheels ship no libcudnn.so)

    def cuda_flags(self) -> list[str]:
        return ["-DKA_HAVE_CUDNN=1", "-isystem", str(self.include)]

    def ldflags(self) -> list[str]:
        # --as-needed: only an extension that calls cuDNN records it as a dependency
        return [f"-L{self.lib}", f"-Wl,-rpath,{self.lib}", "-Wl,--as-needed",
                f"-l:{self.library}", "-Wl,--no-as-needed"]  # fmt: skip


def find_cudnn(roots: list[tuple[Path, Path]]) -> Cudnn | None:
    """The first (include, lib) pair holding cudnn.h and a libcudnn.so* beside it, or None."""
    for include, lib in roots:
        if not (include / "cudnn.h").is_file():
            continue
        libraries = sorted(p.name for p in lib.glob("libcudnn.so*") if p.is_file())
        if libraries:  # libcudnn.so where a symlink exists, else the versioned file
            return Cudnn(include, lib, libraries[0])
    return None


def _cudnn_candidates(cuda_home: str) -> list[tuple[Path, Path]]:
    """The cuDNN that torch's wheels bring (the nvidia-cudnn package), then a toolkit's and the
    system's."""
    roots: list[tuple[Path, Path]] = []
    try:
        import nvidia.cudnn  # pip's nvidia-cudnn-cu* package (a namespace package)

        roots += [(Path(p) / "include", Path(p) / "lib") for p in nvidia.cudnn.__path__]
    except ImportError:
        pass
    roots.append((Path(cuda_home) / "include", Path(cuda_home) / "lib64"))
    roots.append((Path("/usr/include"), Path("/usr/lib/x86_64-linux-gnu")))
    return roots


def _torch_includes(device: str) -> list[str]:
    from torch.utils import cpp_extension

    try:
        return cpp_extension.include_paths(device_type=device)
    except TypeError:  # torch < 2.6 took a bool
        return cpp_extension.include_paths(cuda=device == "cuda")


def _pybind_abi_flags(cpp_extension) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        get = getattr(cpp_extension, "_get_pybind11_abi_build_flags", lambda: [])
        return list(get())


def _arch_flags() -> list[str]:
    """sm_90a on Hopper so wgmma and TMA are available; else the visible GPU's own arch."""
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST")
    capability = (
        listed.split(";")[0].strip()
        if listed
        else environment.compute_capability(settings.gpu_index())
    )
    capability = capability or "9.0"
    digits = capability.replace(".", "").replace("+PTX", "")
    arch = f"{digits}a" if digits == "90" else digits
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}"]


def _source_key(chain: Toolchain, rel: str, text: str) -> str:
    """What finds a source's manifest; its object's key adds what it included (compile_cache)."""
    return compile_cache.key_of(chain.digest(), rel, text)


@dataclass
class _Plan:
    """One build: each source's first key, the objects already cached, the workspace's files."""

    first_keys: dict[Path, str]
    cached: dict[Path, str]
    files: compile_cache.Snapshot

    def pending(self) -> list[Path]:
        return [src for src in self.first_keys if src not in self.cached]


def _plan(ws: Workspace, device: str, chain: Toolchain) -> _Plan:
    files = compile_cache.snapshot(ws.root)
    first_keys = {
        src: _source_key(chain, src.relative_to(ws.root).as_posix(), src.read_text())
        for src in _sources(ws, device)
    }
    cached = {src: compile_cache.lookup(key, files) for src, key in first_keys.items()}
    return _Plan(first_keys, {src: key for src, key in cached.items() if key}, files)


def _extension_dir(chain: Toolchain, object_keys) -> Path:
    key = compile_cache.key_of(chain.digest(), *sorted(object_keys))
    return settings.cache_dir() / "extensions" / key


def _sources(ws: Workspace, device: str) -> list[Path]:
    suffixes = (".cpp", ".cu") if device == "cuda" else (".cpp",)
    return [ws.root / "binding.cpp", *ws.kernel_files(*suffixes)]


def build(ws: Workspace, device: str) -> CompileResult:
    started = time.monotonic()
    if not ws.kernel_files(".cpp", ".cu"):
        return CompileResult(
            False,
            0.0,
            False,
            "kernels/ is empty: write kernels/<op>.cpp/.cu and kernels/<op>_binding.cpp first",
        )
    chain = toolchain(device)
    plan = _plan(ws, device, chain)
    ready = _cached_extension(chain, plan)
    if ready is None:
        # the same sources may be building in another process right now (parallel tests, a
        # re-grade beside a run): wait for that build and link what it published
        with _build_lock(plan):
            plan = _plan(ws, device, chain)
            ready = _cached_extension(chain, plan)
            if ready is None:
                with gpu_lock.compiling(device):  # no timing (cpu) or baselines (GPU) beside it
                    log, ext_dir = _link(ws, device, chain, plan)
    if ready is not None:
        return CompileResult(True, time.monotonic() - started, True, "", str(ready))
    seconds = time.monotonic() - started
    if log is not None:
        return CompileResult(False, seconds, False, trim_log(log, ws.root))
    return CompileResult(True, seconds, False, "", str(ext_dir))


def warm(device: str) -> None:
    """Builds what a machine's first compile would otherwise pay for, the precompiled torch
    prelude (24 s of a first KernelBench run's 32 s compile on a lent H200): a worker calls it
    as it starts (gpu_workers/machine_warm_up.py)."""
    chain = toolchain(device)
    memory = _memory_per_job(settings.cpu_count())
    with gpu_lock.compiling(device):
        precompiled_header.prelude(chain.cxx, chain.cflags, chain.digest(), device, memory)


def _cached_extension(chain: Toolchain, plan: _Plan) -> Path | None:
    """The extension linked from cached objects alone, when every object and it exist."""
    if plan.pending():
        return None
    ext_dir = _extension_dir(chain, plan.cached.values())
    return ext_dir if (ext_dir / LIBRARY_FILE).is_file() else None


@contextmanager
def _build_lock(plan: _Plan) -> Iterator[None]:
    """One build at a time per set of sources, across processes; 256 lock files in all, so a
    build of other sources rarely waits and the cache holds no lock file per source."""
    stripe = compile_cache.key_of(*sorted(plan.first_keys.values()))[:2]
    lock_dir = settings.cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"build-{stripe}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released by the kernel if this process dies
        yield


def _memory_per_job(jobs: int) -> int:
    """What one compiler process may map: the machine's memory shared by the parallel jobs and
    the rest of the worker, 2 to 16 GiB (nvcc and g++ with torch's headers need under 2).
    Unbounded, `#include "/dev/zero"` grew a compiler until the host ran out of memory."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(2 << 30, min(16 << 30, total // (jobs + 1)))


def _link(ws, device, chain: Toolchain, plan: _Plan) -> tuple[str | None, Path | None]:
    """Compiles the missing objects and links; the compiler's log on failure, else the
    extension's folder. The compiler sees the workspace and the cached objects it links,
    read-only, and writes only a private build folder outside the cache; this process publishes
    what it made."""
    (settings.cache_dir() / "objects").mkdir(exist_ok=True)
    prelude = _prelude(device, chain, plan, _memory_per_job(settings.cpu_count()))
    build_dir = Path(tempfile.mkdtemp(prefix="kernelarena-build-"))
    try:
        log = _ninja(ws.root, device, chain, plan, build_dir, prelude)
        if log is not None and prelude and precompiled_header.refused(log):
            # a .gch this compiler cannot read must cost time, never the build; given up
            # only when the build works without it, so no source can switch it off
            refusal, log = log, _ninja(ws.root, device, chain, plan, build_dir, None)
            if log is None:
                precompiled_header.give_up(chain.digest(), refusal)
        if log is not None:
            return log, None
        fresh = _publish_objects(ws.root, plan, build_dir)
        ext_dir = _extension_dir(chain, [*plan.cached.values(), *fresh.values()])
        ext_dir.parent.mkdir(exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix="ext-", dir=ext_dir.parent))
        _publish(build_dir / LIBRARY_FILE, staged / LIBRARY_FILE)
        try:
            os.rename(staged, ext_dir)
        except OSError:  # another process published the same extension first
            shutil.rmtree(staged, ignore_errors=True)
        return None, ext_dir
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


def _publish_objects(root: Path, plan: _Plan, build_dir: Path) -> dict[Path, str]:
    """Each new object's key, published under it with its dependency list. An object whose
    dependencies are not known for sure (no usable .d file, or the workspace changed while it
    compiled) gets a key of its own: this build links it, no other build finds it."""
    unchanged = compile_cache.snapshot(root) == plan.files
    keys = {}
    for src in plan.pending():
        first_key = plan.first_keys[src]
        built = _built_object(build_dir, first_key)
        found = compile_cache.dependencies(Path(f"{built}.d"), built, root, plan.files)
        complete = unchanged and found and src.relative_to(root).as_posix() in found
        key = complete and compile_cache.object_key(first_key, found, plan.files)
        if not key:
            keys[src] = f"unshared-{uuid.uuid4().hex}"
            continue
        _publish(built, compile_cache.object_path(key))
        compile_cache.remember(first_key, found)
        keys[src] = key
    return keys


def _built_object(build_dir: Path, first_key: str) -> Path:
    return build_dir / "obj" / f"{first_key}.o"


def _ninja(root, device, chain, plan: _Plan, build_dir: Path, prelude: Path | None) -> str | None:
    """Runs the build in the sandbox; the compiler's log on failure."""
    (build_dir / "build.ninja").write_text(_ninja_file(root, chain, plan, build_dir, prelude))
    jobs = settings.cpu_count()
    cached = [compile_cache.object_path(key) for key in plan.cached.values()]
    result = sandbox.run(
        ["ninja", "-C", str(build_dir), f"-j{jobs}"],
        cwd=root,
        device=device,
        view=sandbox.View(
            readable=(root, *cached, *([prelude.parent] if prelude else [])),
            writable=(build_dir,),
        ),
        limits=sandbox.Limits(
            timeout_s=600, output_bytes=64_000, address_space_bytes=_memory_per_job(jobs)
        ),
        harness=False,  # an #include of a harness file must fail like any other outside one
    )
    return None if result.ok else result.stdout + result.stderr + (result.failure() or "")


def _prelude(device, chain: Toolchain, plan: _Plan, memory: int) -> Path | None:
    """The precompiled torch prelude, where a C++ file still to compile includes torch."""
    pending = [src for src in plan.pending() if src.suffix == ".cpp"]
    if not any(precompiled_header.uses_torch(src.read_text()) for src in pending):
        return None
    return precompiled_header.prelude(chain.cxx, chain.cflags, chain.digest(), device, memory)


def _publish(source: Path, target: Path) -> None:
    """Copies into the cache's file system, then renames: readers never see half a file."""
    fd, partial = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(fd)
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def _ninja_file(
    root: Path, chain: Toolchain, plan: _Plan, build_dir: Path, prelude: Path | None
) -> str:
    """Each compile also writes the files it read (-MD -MF, g++ and nvcc alike) beside its
    object, into the build folder, for compile_cache."""
    q = _ninja_quote
    lines = [
        "ninja_required_version = 1.3",
        f"cxx = {chain.cxx}",
        f"cflags = {' '.join(chain.cflags)}",
        f"ldflags = {' '.join(chain.ldflags)}",
        f"workspace = -I{q(root)}",
        "rule cxx",
        "  command = $cxx $cflags $workspace $prelude -MD -MF $out.d -c $in -o $out",
        "  description = compile $in",
        "rule link",
        "  command = $cxx $in $ldflags -o $out",
    ]
    if chain.nvcc:
        lines += [
            f"nvcc = {chain.nvcc}",
            f"cuda_flags = {' '.join(chain.cuda_flags)}",
            "rule nvcc",
            "  command = $nvcc $cuda_flags $workspace -MD -MF $out.d -c $in -o $out",
            "  description = compile $in",
        ]
    inputs = []
    for src, first_key in plan.first_keys.items():
        if src in plan.cached:
            inputs.append(str(compile_cache.object_path(plan.cached[src])))
            continue
        rule = "nvcc" if src.suffix == ".cu" else "cxx"
        out = _built_object(build_dir, first_key)
        lines.append(f"build {q(out)}: {rule} {q(src)}")
        if rule == "cxx" and prelude and precompiled_header.uses_torch(src.read_text()):
            lines.append(f"  prelude = -include {q(prelude)}")
        inputs.append(str(out))
    lines.append(f"build {q(build_dir / LIBRARY_FILE)}: link {' '.join(map(q, inputs))}")
    return "\n".join(lines) + "\n"


def _ninja_quote(path) -> str:
    return str(path).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _is_command_echo(line: str) -> bool:
    """ninja echoes a failed command line: flags and paths, no help to a reader."""
    return " -c " in line and " -o " in line


_ERROR_LINE = re.compile(r"(error|undefined reference|fatal)", re.IGNORECASE)


def trim_log(log: str, root: Path, max_errors: int = 8, max_chars: int = 4000) -> str:
    """The first errors with file:line and a little context, paths relative to the workspace."""
    text = log.replace(str(root) + "/", "")
    lines = [
        line
        for line in text.splitlines()
        if not line.startswith(("[", "ninja:", "FAILED:")) and not _is_command_echo(line)
    ]
    picked: list[str] = []
    errors = 0
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line) and errors < max_errors:
            errors += 1
            picked.extend(lines[i : i + 3])
    body = "\n".join(dict.fromkeys(picked)) if picked else "\n".join(lines[-30:])
    if len(body) > max_chars:
        body = body[:max_chars] + "\n[... trimmed ...]"
    return body
