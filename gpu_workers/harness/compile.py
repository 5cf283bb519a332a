"""Builds binding.cpp plus kernels/ into one extension module (`kernel_ext`) with ninja.

Objects are cached by content (source, every workspace header, flags, toolchain), so an unchanged
workspace never rebuilds, a change to one .cu recompiles that file alone, and candidates that share
a binding file share its object; a C++ file that includes torch compiles against a precompiled
prelude of its headers (precompiled_header). The compiler runs in the sandbox, since sources are
untrusted: it sees the toolchain, the workspace and the cached objects it links, so an #include
of any other file (the harness, the cache, another run) fails.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import sysconfig
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from gpu_workers.harness import environment, precompiled_header, sandbox, settings
from gpu_workers.harness.workspace import Workspace

LIBRARY_FILE = f"{settings.EXTENSION_NAME}.so"
_HEADER_SUFFIXES = (".h", ".hpp", ".cuh")


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
        return _sha(repr(self), _torch_version())


def _sha(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


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
    ldflags += ["-lc10_cuda", "-ltorch_cuda"]
    return Toolchain(
        cxx=os.environ.get("CXX", "c++"),
        nvcc=os.path.join(cuda_home, "bin", "nvcc"),
        cflags=tuple(cflags),
        cuda_flags=tuple(cuda_flags),
        ldflags=tuple(ldflags),
    )


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


def _object_key(chain: Toolchain, rel: str, text: str, headers: str) -> str:
    return _sha(chain.digest(), rel, text, headers)


def _headers_digest(ws: Workspace) -> str:
    files = [ws.root / "binding_registry.h", *ws.kernel_files(*_HEADER_SUFFIXES)]
    return _sha(*(f"{p.name}\n{p.read_text()}" for p in files))


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
    headers = _headers_digest(ws)
    objects = {
        src: _object_key(chain, src.relative_to(ws.root).as_posix(), src.read_text(), headers)
        for src in _sources(ws, device)
    }
    ext_dir = settings.cache_dir() / "extensions" / _sha(chain.digest(), *sorted(objects.values()))
    if (ext_dir / LIBRARY_FILE).is_file():
        return CompileResult(True, time.monotonic() - started, True, "", str(ext_dir))
    log = _link(ws, device, chain, objects, ext_dir)
    seconds = time.monotonic() - started
    if log is not None:
        return CompileResult(False, seconds, False, trim_log(log, ws.root))
    return CompileResult(True, seconds, False, "", str(ext_dir))


def _memory_per_job(jobs: int) -> int:
    """What one compiler process may map: the machine's memory shared by the parallel jobs and
    the rest of the worker, 2 to 16 GiB (nvcc and g++ with torch's headers need under 2).
    Unbounded, `#include "/dev/zero"` grew a compiler until the host ran out of memory."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(2 << 30, min(16 << 30, total // (jobs + 1)))


def _link(ws, device, chain: Toolchain, objects: dict[Path, str], ext_dir: Path) -> str | None:
    """Compiles the missing objects and links; returns the compiler's log on failure. The
    compiler sees the workspace and the cached objects it links, read-only, and writes only a
    private build folder outside the cache; this process publishes what it made."""
    object_dir = settings.cache_dir() / "objects"
    object_dir.mkdir(exist_ok=True)
    cached = {key: object_dir / f"{key}.o" for key in set(objects.values())}
    cached = {key: path for key, path in cached.items() if path.is_file()}
    jobs = os.cpu_count() or 1
    prelude = _prelude(device, chain, objects, cached, _memory_per_job(jobs))
    build_dir = Path(tempfile.mkdtemp(prefix="kernelarena-build-"))
    try:
        log = _ninja(ws.root, device, chain, (objects, cached), build_dir, prelude)
        if log is not None and prelude and precompiled_header.refused(log):
            # a .gch this compiler cannot read must cost time, never the build; given up
            # only when the build works without it, so no source can switch it off
            refusal, log = log, _ninja(ws.root, device, chain, (objects, cached), build_dir, None)
            if log is None:
                precompiled_header.give_up(chain.digest(), refusal)
        if log is not None:
            return log
        for fresh in build_dir.glob("obj/*.o"):
            _publish(fresh, object_dir / fresh.name)
        ext_dir.parent.mkdir(exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix="ext-", dir=ext_dir.parent))
        _publish(build_dir / LIBRARY_FILE, staged / LIBRARY_FILE)
        try:
            os.rename(staged, ext_dir)
        except OSError:  # another process published the same extension first
            shutil.rmtree(staged, ignore_errors=True)
        return None
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


def _ninja(root, device, chain, sources, build_dir: Path, prelude: Path | None) -> str | None:
    """Runs the build in the sandbox; the compiler's log on failure."""
    objects, cached = sources
    (build_dir / "build.ninja").write_text(
        _ninja_file(root, chain, objects, cached, build_dir, prelude)
    )
    jobs = os.cpu_count() or 1
    result = sandbox.run(
        ["ninja", "-C", str(build_dir), f"-j{jobs}"],
        cwd=root,
        device=device,
        view=sandbox.View(
            readable=(root, *cached.values(), *([prelude.parent] if prelude else [])),
            writable=(build_dir,),
        ),
        limits=sandbox.Limits(
            timeout_s=600, output_bytes=64_000, address_space_bytes=_memory_per_job(jobs)
        ),
        harness=False,  # an #include of a harness file must fail like any other outside one
    )
    return None if result.ok else result.stdout + result.stderr + (result.failure() or "")


def _prelude(device, chain: Toolchain, objects, cached, memory: int) -> Path | None:
    """The precompiled torch prelude, where a C++ file still to compile includes torch."""
    pending = [src for src, key in objects.items() if key not in cached and src.suffix == ".cpp"]
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
    root: Path,
    chain: Toolchain,
    objects: dict[Path, str],
    cached: dict[str, Path],
    build_dir: Path,
    prelude: Path | None,
) -> str:
    q = _ninja_quote
    lines = [
        "ninja_required_version = 1.3",
        f"cxx = {chain.cxx}",
        f"cflags = {' '.join(chain.cflags)}",
        f"ldflags = {' '.join(chain.ldflags)}",
        f"workspace = -I{q(root)}",
        "rule cxx",
        "  command = $cxx $cflags $workspace $prelude -c $in -o $out",
        "  description = compile $in",
        "rule link",
        "  command = $cxx $in $ldflags -o $out",
    ]
    if chain.nvcc:
        lines += [
            f"nvcc = {chain.nvcc}",
            f"cuda_flags = {' '.join(chain.cuda_flags)}",
            "rule nvcc",
            "  command = $nvcc $cuda_flags $workspace -c $in -o $out",
            "  description = compile $in",
        ]
    inputs = []
    for src, key in objects.items():
        if key in cached:
            inputs.append(str(cached[key]))
            continue
        rule = "nvcc" if src.suffix == ".cu" else "cxx"
        out = build_dir / "obj" / f"{key}.o"
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
