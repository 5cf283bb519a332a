"""The workspace an agent sees (CUDA-Agent's agent_workdir layout), built from skills/<target>/.

    SKILL.md  model.py  binding.cpp  binding_registry.h       read-only
    model_new.py  kernels/<name>.{cu,cuh,cpp,h,hpp}          written by the agent

The harness itself is never inside the workspace.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.build.workspace_paths import (
    READ_ONLY,
    relative_path,
    text_fault,
    writable_path,
)


@dataclass
class Workspace:
    root: Path
    target: str

    def resolve(self, path: str) -> Path:
        """The absolute path of a workspace file; ValueError if it would escape the workspace."""
        return self.root / relative_path(path)

    def check_writable(self, path: str) -> str:
        return writable_path(path, self.target)

    def list_files(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.root).as_posix()) for p in self.root.rglob("*") if p.is_file()
        )

    def read_file(self, path: str) -> str:
        return self.resolve(path).read_text()

    def write_file(self, path: str, content: str) -> None:
        rel = self.check_writable(path)
        if fault := text_fault(rel, content):
            raise ValueError(fault)
        target = self.root / rel
        target.parent.mkdir(exist_ok=True)
        target.write_text(content)

    def sources(self) -> dict[str, str]:
        """The files the agent wrote, by relative path."""
        files = [self.root / "model_new.py", *sorted((self.root / "kernels").glob("*"))]
        return {str(p.relative_to(self.root)): p.read_text() for p in files if p.is_file()}

    def kernel_files(self, *suffixes: str) -> list[Path]:
        return sorted(p for p in (self.root / "kernels").glob("*") if p.suffix in suffixes)

    def problem_source(self) -> str:
        return (self.root / "model.py").read_text()


def create(root: Path, problem_source: str, target: str) -> Workspace:
    """A fresh workspace at root (which must not exist yet) for one problem and target."""
    settings.check_device(target)
    template = settings.SKILLS_DIR / target
    root.mkdir(parents=True)
    for name in ("SKILL.md", "binding.cpp", "binding_registry.h", "model_new.py"):
        shutil.copyfile(template / name, root / name)
    (root / "model.py").write_text(problem_source)
    (root / "kernels").mkdir()
    for name in READ_ONLY:
        (root / name).chmod(0o444)
    return Workspace(root=root, target=target)


def copy_candidate(workspace: Workspace, candidate_dir: Path) -> None:
    """Copies a candidate (model_new.py and kernels/) in; anything else is refused by name."""
    if not (candidate_dir / "model_new.py").is_file():
        raise ValueError(f"{candidate_dir} has no model_new.py")
    for path in sorted(candidate_dir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(candidate_dir).as_posix()
            workspace.write_file(rel, path.read_text())
