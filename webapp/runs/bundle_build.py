"""Builds this KernelArena bundle's kernels into the module `kernel_ext`, and checks them.

    python build.py                       build kernel_ext, then import model_new
    python build.py --verify              also compare ModelNew with Model on seeded inputs
    python build.py --verify --device cpu the device (default: the target in report.json)

Exit status: 0 built (and every trial matched), 1 a trial did not match, 2 the build or an
import failed. Needs torch and ninja. The objects and the module go to build/ next to this file.
From your own code: `import build; build.build_extension("cuda")`, then `import model_new`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXTENSION_NAME = "kernel_ext"
DEFAULT_TOLERANCE = 1e-2
DEFAULT_SEEDS = (11, 22, 33, 44, 55)
DEFAULT_INIT_SEED = 1234


class BuildError(Exception):
    """The extension did not build, or model.py / model_new.py did not import."""


def read_report() -> dict:
    try:
        report = json.loads((HERE / "report.json").read_text())
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}


def default_device(report: dict) -> str:
    return "cpu" if report.get("target") == "cpu" else "cuda"


def sources(device: str) -> list[Path]:
    """binding.cpp and kernels/*.cpp, plus kernels/*.cu for cuda (as the harness builds them)."""
    suffixes = (".cpp", ".cu") if device == "cuda" else (".cpp",)
    kernels = sorted(p for p in (HERE / "kernels").glob("*") if p.suffix in suffixes)
    return [HERE / "binding.cpp", *kernels]


def _cuda_arch_flags(torch) -> list[str]:
    """sm_90a on Hopper (wgmma, TMA), else the GPU's own arch, as the harness compiles."""
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if listed:
        capability = listed.replace(" ", ";").split(";")[0].strip()
    else:
        major, minor = torch.cuda.get_device_capability()
        capability = f"{major}.{minor}"
    digits = capability.replace(".", "").replace("+PTX", "")
    arch = f"{digits}a" if digits == "90" else digits
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}"]


def build_extension(device: str, verbose: bool = False):
    """Compiles (or reuses) build/ and registers the module as `kernel_ext` for model_new.py."""
    import torch
    from torch.utils import cpp_extension

    files = sources(device)
    if len(files) == 1:
        raise BuildError("kernels/ holds no sources for this device: nothing to build")
    cflags = ["-O3", "-std=c++17"]
    ldflags: list[str] = []
    cuda_flags: list[str] = []
    if device == "cpu":
        cflags.append("-fopenmp")
        ldflags.append("-fopenmp")
    else:
        if not torch.cuda.is_available():
            raise BuildError("--device cuda, but torch sees no CUDA device")
        cuda_flags = ["-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr"]
        cuda_flags += _cuda_arch_flags(torch)
        ldflags.append("-lcublas")
    build_dir = HERE / "build"
    build_dir.mkdir(exist_ok=True)
    # torch finds ninja on PATH; a virtual environment's ninja sits beside its python.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    try:
        module = cpp_extension.load(
            name=EXTENSION_NAME,
            sources=[str(p) for p in files],
            extra_cflags=cflags,
            extra_cuda_cflags=cuda_flags or None,
            extra_ldflags=ldflags,
            extra_include_paths=[str(HERE)],
            build_directory=str(build_dir),
            with_cuda=device == "cuda",
            verbose=verbose,
        )
    except Exception as error:  # the compiler's log is in the message
        raise BuildError(f"building {EXTENSION_NAME} failed:\n{error}") from error
    sys.modules[EXTENSION_NAME] = module
    return module


def _load(name: str):
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(name, None)
        detail = traceback.format_exc(limit=-3)
        raise BuildError(f"importing {name}.py failed: {error!r}\n{detail}") from error
    return module


def load_models(device: str):
    """model.py and model_new.py as modules, with the extension already built."""
    problem = _load("model")
    candidate = _load("model_new")
    for module, cls in ((problem, "Model"), (candidate, "ModelNew")):
        if not isinstance(getattr(module, cls, None), type):
            raise BuildError(f"{module.__name__}.py defines no class {cls}")
    return problem, candidate


def _seeded(torch, seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def build_model(torch, problem, cls, device: str, seed: int):
    _seeded(torch, seed)
    return cls(*problem.get_init_inputs()).to(device)


def make_inputs(torch, problem, seed: int, device: str) -> list:
    _seeded(torch, seed)
    with torch.device(device):
        inputs = problem.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def flatten(torch, out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, list | tuple):
        return [t for item in out for t in flatten(torch, item)]
    raise TypeError(f"outputs must be tensors or tuples of tensors, got {type(out).__name__}")


def compare(torch, reference: list, candidate: list, atol: float, rtol: float):
    """(ok, max abs error, problems) for one trial's outputs."""
    if len(reference) != len(candidate):
        return False, float("inf"), [f"{len(candidate)} outputs, expected {len(reference)}"]
    ok, max_abs, problems = True, 0.0, []
    for i, (ref, out) in enumerate(zip(reference, candidate, strict=True)):
        if out.shape != ref.shape or out.dtype != ref.dtype:
            problems.append(
                f"output {i}: got {tuple(out.shape)} {out.dtype}, "
                f"expected {tuple(ref.shape)} {ref.dtype}"
            )
            ok, max_abs = False, float("inf")
            continue
        r, o = ref.detach().double().cpu(), out.detach().double().cpu()
        diff = (o - r).abs().nan_to_num(nan=float("inf"))
        err = float(diff.max()) if diff.numel() else 0.0
        max_abs = max(max_abs, err)
        if not torch.allclose(o, r, atol=atol, rtol=rtol, equal_nan=True):
            bad = int((diff > atol + rtol * r.abs()).sum())
            problems.append(
                f"output {i}: {bad} of {r.numel()} elements outside atol={atol} rtol={rtol} "
                f"(max abs err {err:.3g})"
            )
            ok = False
    return ok, max_abs, problems


def verify(torch, problem, candidate, device: str, protocol: dict) -> bool:
    atol = float(protocol.get("atol", DEFAULT_TOLERANCE))
    rtol = float(protocol.get("rtol", DEFAULT_TOLERANCE))
    seeds = [int(s) for s in protocol.get("public_seeds") or DEFAULT_SEEDS]
    init_seed = int(protocol.get("init_seed", DEFAULT_INIT_SEED))
    if protocol.get("allow_tensor_cores") is False:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    try:
        reference = build_model(torch, problem, problem.Model, device, init_seed)
        model_new = build_model(torch, problem, candidate.ModelNew, device, init_seed)
    except Exception as error:
        raise BuildError(f"constructing the models failed: {error!r}") from error
    expected, got = reference.state_dict(), model_new.state_dict()
    if expected.keys() == got.keys() and all(expected[k].shape == got[k].shape for k in got):
        model_new.load_state_dict(expected)
    name = protocol.get("name") or "loose"
    print(f"verifying on {device}: protocol {name}, atol={atol} rtol={rtol}, {len(seeds)} trials")
    all_ok, worst = True, 0.0
    for trial, seed in enumerate(seeds):
        label = f"trial {trial} (seed {seed})"
        try:
            with torch.no_grad():
                out = flatten(torch, model_new(*make_inputs(torch, problem, seed, device)))
                ref = flatten(torch, reference(*make_inputs(torch, problem, seed, device)))
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as error:
            print(f"{label}: FAIL: {error!r}")
            all_ok = False
            continue
        ok, max_abs, problems = compare(torch, ref, out, atol, rtol)
        worst = max(worst, max_abs)
        print(f"{label}: {'ok' if ok else 'MISMATCH'}, max abs err {max_abs:.3g}")
        for line in problems:
            print(f"  {line}")
        all_ok &= ok
    if all_ok:
        print(f"verified: every output matched the reference (max abs err {worst:.3g})")
    else:
        print(f"FAILED: ModelNew does not match Model (max abs err {worst:.3g})")
    return all_ok


def main(argv: list[str] | None = None) -> int:
    report = read_report()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verify", action="store_true", help="compare ModelNew with Model")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=default_device(report))
    parser.add_argument("--verbose", action="store_true", help="show the compiler's commands")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("error: torch is not installed (pip install torch ninja)", file=sys.stderr)
        return 2
    protocol = report.get("protocol") if isinstance(report.get("protocol"), dict) else {}
    try:
        module = build_extension(args.device, args.verbose)
        names = ", ".join(p.relative_to(HERE).as_posix() for p in sources(args.device))
        print(f"built {EXTENSION_NAME} ({args.device}) from {names} in {HERE / 'build'}")
        problem, candidate = load_models(args.device)
        print(f"imported model_new.ModelNew (kernel_ext: {module.__file__})")
        if not args.verify:
            return 0
        return 0 if verify(torch, problem, candidate, args.device, protocol) else 1
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
