"""A Session is one problem's workspace on one device with the harness's tools: what the agent,
the CLI and the Celery tasks all use. Every method returns the Verdict's JSON sections."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from gpu_workers.harness import compile as compile_mod
from gpu_workers.harness import environment, gpu_lock, sandbox, settings, workspace
from gpu_workers.harness import graph as graph_mod
from gpu_workers.harness import profile as profile_mod
from gpu_workers.harness import verify as verify_mod
from gpu_workers.harness.problem import ProblemError, check_source
from gpu_workers.harness.protocol import LOOSE, Protocol


def _scratch() -> str | None:
    """tmpfs when it has room: verify and profile pass every output through files."""
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if stat.f_bavail * stat.f_frsize > 8 << 30 else None


class Session:
    def __init__(
        self,
        problem_source: str,
        device: str = "cpu",
        protocol: Protocol | None = None,
        root: Path | None = None,
    ):
        check_source(problem_source)
        self.device = settings.check_device(device)
        self.protocol = protocol or LOOSE
        self._owns_root = root is None
        base = Path(root) if root else Path(tempfile.mkdtemp(prefix="kernelarena-", dir=_scratch()))
        self.workspace = workspace.create(base / "workspace", problem_source, device)
        self.root = self.workspace.root
        self.workdir = base / "io"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._base = base
        self._verified: tuple[str, tuple[dict, verify_mod.Measurement | None]] | None = None
        self._graph: dict | None = None

    # ---- files (what the agent reads and writes) ----
    def list_files(self) -> list[str]:
        return self.workspace.list_files()

    def read_file(self, path: str) -> str:
        return self.workspace.read_file(path)

    def write_file(self, path: str, content: str) -> None:
        self.workspace.write_file(path, content)

    def sources(self) -> dict[str, str]:
        return self.workspace.sources()

    def skill(self) -> str:
        return self.workspace.read_file("SKILL.md")

    # ---- tools ----
    def _digest(self) -> str:
        text = "\0".join(f"{k}\0{v}" for k, v in sorted(self.sources().items()))
        return hashlib.sha256(text.encode()).hexdigest()

    def _compile_result(self) -> compile_mod.CompileResult:
        # Cheap when nothing changed: build() hashes the sources and finds the cached extension.
        return compile_mod.build(self.workspace, self.device)

    def compile(self) -> dict:
        return self._compile_result().to_dict()

    def verify(self) -> dict:
        return self._verify()[0]

    def _verify(self) -> tuple[dict, verify_mod.Measurement | None]:
        """One sandboxed run per distinct set of sources: trials, then timing."""
        digest = self._digest()
        if self._verified and self._verified[0] == digest:
            return self._verified[1]
        built = self._compile_result()
        if not built.ok:
            failed = verify_mod.VerifyResult(ok=False, error="compile failed: " + built.log)
            return failed.to_dict(), None
        with gpu_lock.hold(self.device):
            try:
                result, measured = verify_mod.run(
                    self.workspace, built.extension_dir, self.device, self.protocol, self.workdir
                )
                outcome = (result.to_dict(), measured)
            except ProblemError as exc:  # the reference failed: not the candidate's fault
                outcome = (verify_mod.VerifyResult(ok=False, error=str(exc)).to_dict(), None)
        self._verified = (digest, outcome)
        return outcome

    def profile(self) -> dict:
        verdict, measured = self._verify()
        if not verdict["ok"] or measured is None:
            return profile_mod.ProfileResult(
                ok=False, error="not profiled: the candidate did not verify"
            ).to_dict()
        with gpu_lock.hold(self.device):  # baselines are measured on first use
            try:
                return profile_mod.run(
                    self.workspace.root / "model.py",
                    self.device,
                    self.protocol,
                    self.workdir,
                    measured,
                ).to_dict()
            except ProblemError as exc:
                return profile_mod.ProfileResult(ok=False, error=str(exc)).to_dict()

    def graph(self) -> dict:
        """The problem's Graph IR (docs/fusion.md), captured in the sandbox once per session:
        model.py is read-only."""
        if self._graph is None:
            with gpu_lock.hold(self.device):  # it runs the problem on the device
                self._graph = graph_mod.capture(
                    self.read_file("model.py"), self.device, self.protocol, workdir=self.workdir
                )
        return self._graph

    def evaluate(self) -> dict:
        """The full Verdict of DESIGN.md."""
        compiled = self.compile()
        verified = self.verify() if compiled["ok"] else None
        profiled = self.profile() if verified and verified["ok"] else None
        return {
            "compile": compiled,
            "verify": verified,
            "profile": profiled,
            "environment": environment.describe(self.device, settings.gpu_index()),
            "protocol": self.protocol.to_dict(),
            "sandbox": sandbox.confinement(),
        }

    def close(self) -> None:
        if self._owns_root:
            shutil.rmtree(self._base, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def verdict_ok(verdict: dict) -> bool:
    return bool(verdict.get("profile") and verdict["profile"]["ok"])
