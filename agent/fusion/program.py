"""What the fusion compiler hands back: the FusionProgram (docs/fusion.md, "The fusion compiler's
output"), and the per-kernel sources the code generators hand the binding generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# The IR dtypes a kernel may read or write, as C types. float32 is the arithmetic type; a bool
# mask or an int64 index is read where it masks or indexes, an int64 written by argmax/argmin.
C_TYPES = {"float32": "float", "int64": "int64_t", "bool": "bool"}


@dataclass(frozen=True)
class Param:
    """A launcher's argument: a buffer read ("in"), written ("out"), or written then read by the
    same kernel ("work": a GEMM's product before its epilogue), or a number passed by value
    ("scalar": an input given to forward as a Python number)."""

    buffer: str
    role: str  # "in" | "out" | "work" | "scalar"
    dtype: str = "float32"  # a key of C_TYPES

    @property
    def c_type(self) -> str:
        return C_TYPES[self.dtype]

    def declaration(self, restrict: bool) -> str:
        """The C parameter: a pointer (const where read), or the number itself."""
        if self.role == "scalar":
            return f"float {self.buffer}"
        qualifier = " __restrict__" if restrict else ""
        return f"{'const ' if self.role == 'in' else ''}{self.c_type}*{qualifier} {self.buffer}"


@dataclass
class KernelSource:
    """One planned kernel as generated code: its launcher's C signature and launch knobs."""

    name: str
    kind: str  # a key of GENERATORS: pointwise | row_reduction | axis_reduction | ...
    nodes: list[str]
    code: str
    launcher: str  # extern "C" function name
    params: list[Param]
    launch: dict[str, int]  # defaults, in launcher argument order
    tunables: dict[str, list[int]]
    description: str
    work: dict[str, int] = field(default_factory=dict)  # scratch buffer -> floats (GEMM product)

    def info(self) -> KernelInfo:
        return KernelInfo(
            self.name,
            self.kind,
            list(self.nodes),
            {k: list(v) for k, v in self.tunables.items()},
            self.description,
        )


@dataclass(frozen=True)
class KernelInfo:
    """One planned kernel as FusionProgram.kernels lists it."""

    name: str
    kind: str  # a key of GENERATORS: pointwise | row_reduction | axis_reduction | ...
    nodes: list[str]  # the IR nodes it covers (reshape/identity aliases included)
    tunables: dict[str, list[int]]  # launch parameter -> values worth trying
    description: str = ""

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "nodes": list(self.nodes),
            "tunables": dict(self.tunables),
        }


@dataclass
class FusionProgram:
    """The generated candidate for one graph.

    files: workspace path -> text (kernels/fused.cu or kernels/fused.cpp,
    kernels/fused_binding.cpp, model_new.py); kernels: a KernelInfo (name, kind, nodes,
    tunables) per kernel, in launch order; launch: the default LAUNCH (kernel name -> {param:
    value}); unsupported: why nothing was generated (non-empty means `files` is empty)."""

    target: str
    files: dict[str, str] = field(default_factory=dict)
    kernels: list[KernelInfo] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    launch: dict[str, dict[str, int]] = field(default_factory=dict)
    _model_new: Callable[[dict], str] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not self.unsupported and bool(self.files)

    def model_new(self, launch: dict | None = None) -> str:
        """model_new.py with `launch` (kernel name -> {param: value}, partial is fine) merged over
        the default LAUNCH; raises KeyError for a kernel or parameter that does not exist."""
        if self._model_new is None:
            raise ValueError("nothing was generated: " + "; ".join(self.unsupported))
        merged = {name: dict(values) for name, values in self.launch.items()}
        for name, values in (launch or {}).items():
            if name not in merged:
                raise KeyError(f"no kernel named {name!r} (kernels: {', '.join(merged)})")
            for key, value in values.items():
                if key not in merged[name]:
                    raise KeyError(f"kernel {name} has no launch parameter {key!r}")
                merged[name][key] = int(value)
        return self._model_new(merged)

    def summary(self) -> str:
        """A few lines for the agent's thought: the kernels planned and the IR nodes each covers."""
        if self.unsupported:
            lines = ["Cannot generate kernels for this graph:"]
            lines += [f"  - {reason}" for reason in self.unsupported]
            return "\n".join(lines)
        covered = sum(len(k.nodes) for k in self.kernels)
        plural = "s" if len(self.kernels) != 1 else ""
        lines = [
            f"Fusion plan ({self.target}): {len(self.kernels)} kernel{plural} "
            f"covering {covered} IR nodes."
        ]
        for k in self.kernels:
            lines.append(f"  {k.name} [{k.kind}]: {', '.join(k.nodes)}")
            if k.description:
                lines.append(f"    {k.description}")
        return "\n".join(lines)
