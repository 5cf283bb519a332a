"""A Session is one problem's workspace on one device with the harness's tools: what the agent,
the CLI and the Celery tasks all use. Every method returns the Verdict's JSON sections."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.build import compile as compile_mod
from gpu_workers.harness.build import workspace
from gpu_workers.harness.capture import graph as graph_mod
from gpu_workers.harness.judge import (
    clock_record,
    compiler_seed,
    environment,
    failure,
    gpu_lock,
    runner_process,
)
from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge import profile as profile_mod
from gpu_workers.harness.judge import verify as verify_mod
from gpu_workers.harness.judge.fork_server import ForkServer, ForkServerFailed
from gpu_workers.harness.judge.judge import Batches, Judge
from gpu_workers.harness.judge.phases import Phases
from gpu_workers.harness.judge.protocol import LOOSE, Protocol
from gpu_workers.harness.judge.runner_process import (
    HARNESS,
    RunnerDied,
    RunnerError,
    RunnerFailed,
)
from gpu_workers.harness.judge.source_gate import Violation
from gpu_workers.harness.problem_source import source_sha256
from gpu_workers.harness.runner.problem import ProblemError, check_source
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.vocabulary import sources_digest

MEASUREMENT_ATTEMPTS = 3
# A tune call's variants are timed for this long each, where a step times for the protocol's
# timing_budget_s, and only the fastest is then measured in full (Session.screening, agent/tune):
# on level 2 (H200, fusion v5) a variant held the GPU lock about 4 s, 2.6-3.6 s of it timing, so
# a run's tune step was most of its GPU time. Everything else is judged as in any step.
SCREENING_BUDGET_S = 0.5
# A variant's build is one or two translation units, each a compiler of a core or so: two
# cores a build keep a 16-core host's builds from waiting on each other.
PREBUILD_CORES_PER_JOB = 2
# Judged steps tried where the judge's own memory ran out (Session._judge).
JUDGE_MEMORY_ATTEMPTS = 2
# Candidate processes kept getting ready ahead of the steps that take them, per device, and
# whether the pool is topped up while a step is judged (as soon as the step took its process).
# A process's start (an interpreter, torch, the observer's first use; nothing on the device) took
# 5-7 s on the H200 (import torch alone 4-6 s on the lent H100), two or three judged steps
# there, so an agent tuning variants back to back (the fusion agent) waited for it step after
# step; three, started in turn during steps, keep one ready. A GPU host's 16 cores leave the
# judged step's own core alone. On the cpu target one, started outside steps: it would take one
# of the two cores being timed. A session told it judges one candidate (a submission, a
# re-grade) prepares one.
_PREPARED_PROCESSES = {"cpu": 1, "cuda": 3}
_PREPARE_DURING_STEPS = {"cpu": False, "cuda": True}
# How long eager timed alone stands for a session's later steps (Session._eager_alone).
EAGER_ALONE_FRESH_S = 300.0
# A candidate's call may take SLOWDOWN_LIMIT times eager's (judged useless long before), and
# never less than CALL_FLOOR_S (its first call makes its device context and loads its modules),
# up to the protocol's step timeout: with that timeout alone, a hung candidate held the GPU lock
# for ten minutes, and every run sharing the GPU waited behind it.
SLOWDOWN_LIMIT = 1000
CALL_FLOOR_S = 30.0
# Whether a session that will profile (an agent's) starts its problem's baselines while its first
# sources compile (Session._measure_baselines_ahead): on a GPU the reference that measures them
# gets ready (a process, torch.compile's imports) meanwhile, and the measurement, quiet, takes
# the lock once the builds under way end (four runs sharing an H200 spent their first 16 s
# compiling); on the cpu target the reference's start would take the cores the build uses.
_BASELINES_AHEAD = {"cpu": False, "cuda": True}


class Session:
    def __init__(
        self,
        problem_source: str,
        device: str = "cpu",
        protocol: Protocol | None = None,
        root: Path | None = None,
        candidates: int | None = None,
        baselines_ahead: bool = False,
    ):
        """`candidates`: how many candidates the caller will judge, when it knows (1 for a
        submission or a re-grade); None for an agent's session, which gets the device's pool of
        prepared processes. `baselines_ahead`: the caller will profile (an agent's run), so the
        baselines are measured while the first sources compile, where the device gains by it
        (_BASELINES_AHEAD). A session that may never profile (a test, a verify) leaves them to
        its first profile: tests/gpu's attack sessions measured 34 problems' for nothing."""
        check_source(problem_source)
        self.device = settings.check_device(device)
        self.protocol = protocol or LOOSE
        self._owns_root = root is None
        base = Path(root) if root else Path(tempfile.mkdtemp(prefix="kernelarena-"))
        self.workspace = workspace.create(base / "workspace", problem_source, device)
        self.root = self.workspace.root
        self.workdir = base / "io"
        self.workdir.mkdir(parents=True, exist_ok=True)
        # The reference runner sees this folder alone: the problem, never a candidate's files.
        self._problem_path = base / "reference" / "model.py"
        self._problem_path.parent.mkdir(exist_ok=True)
        self._problem_path.write_text(problem_source)
        self._base = base
        self._reference: runner_process.RunnerProcess | None = None
        self._verified: tuple[str, tuple[dict, profile_mod.Measurement | None]] | None = None
        self._screening = False  # judged steps time for SCREENING_BUDGET_S (screening)
        self._graph: dict | None = None
        # the next candidates' processes, oldest first (_PREPARED_PROCESSES)
        self._prepared: list[runner_process.RunnerProcess] = []
        self._stages = 0
        self._candidates = candidates
        self._judged = 0  # candidates whose judged step began
        self._alone: tuple[float, Batches] | None = None  # (when, eager timed alone)
        self._reference_loaded = False
        # Runners are forked from this session's fork server once it is up; where it cannot
        # confine them (or fails), started afresh, and `fork_server_why` says why.
        self._fork_server: ForkServer | None = None
        self._forking = True
        self.fork_server_why: str | None = None
        self._baselines_ahead = baselines_ahead and _BASELINES_AHEAD[self.device]
        self._ahead: threading.Thread | None = None

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
        return sources_digest(self.sources())

    def _compile_result(self) -> compile_mod.CompileResult:
        # Cheap when nothing changed: build() hashes the sources and finds the cached extension.
        return compile_mod.build(self.workspace, self.device)

    def prebuild(self, variants: list[dict[str, str]]) -> int:
        """Compiles a tune call's variants side by side before they are judged one by one, each
        in a copy of the workspace holding its files (whole texts by relative path): the compile
        cache is keyed by the sources, not by where they lie, so each variant's own compile then
        finds its extension built. Returns how many built; one that does not is compiled again
        when its turn comes and its error reported there, as without this."""
        jobs = max(1, min(len(variants), settings.cpu_count() // PREBUILD_CORES_PER_JOB))
        copies = Path(tempfile.mkdtemp(prefix="variants-", dir=self.workspace.root.parent))
        try:
            spaces = []
            for number, files in enumerate(variants):
                root = copies / str(number)
                shutil.copytree(self.workspace.root, root)
                for path, text in files.items():
                    (root / workspace.relative_path(path)).write_text(text)
                spaces.append(workspace.Workspace(root=root, target=self.workspace.target))
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                built = list(pool.map(lambda ws: compile_mod.build(ws, self.device).ok, spaces))
        finally:
            shutil.rmtree(copies, ignore_errors=True)
        return sum(built)

    def compile(self) -> dict:
        step_follows = not (self._verified and self._verified[0] == self._digest())
        if step_follows:
            self._get_ready()  # a judged step follows: while the sources compile
            self._measure_baselines_ahead()
        built = self._compile_result().to_dict()
        if step_follows:
            self._get_ready()  # the fork server may have come up while they compiled
        return built

    def verify(self) -> dict:
        return self._verify()[0]

    @contextmanager
    def screening(self):
        """Judged steps inside it time the candidate for SCREENING_BUDGET_S, not the protocol's
        budget, and say `screened` in their verdicts (and their profiles): a tune call ranks its
        variants so. Once it ends, verify or profile of the same sources measure in full."""
        self._screening = True
        try:
            yield
        finally:
            self._screening = False

    def _verify(self) -> tuple[dict, profile_mod.Measurement | None]:
        """One candidate runner per distinct set of sources: trials, then timing."""
        digest = self._digest()
        if self._verified and self._verified[0] == digest and self._stands(self._verified[1][0]):
            return self._verified[1]
        built = self._compile_result()
        if not built.ok:
            failed = verify_mod.VerifyResult(ok=False, error="compile failed: " + built.log)
            return failed.to_dict(), None
        gated = verify_mod.static_gate(self.sources())
        outcome = (gated.to_dict(), None) if gated else self._judge(built.extension_dir)
        if outcome[0].get("failed_by") != failure.INFRASTRUCTURE:  # the machine's: try again
            self._verified = (digest, outcome)
        return outcome

    def _stands(self, verdict: dict) -> bool:
        """Whether a verdict of these sources answers now: a screened one only while screening."""
        return self._screening or not verdict.get("screened")

    def _judge(self, extension_dir: str) -> tuple[dict, profile_mod.Measurement | None]:
        """A judged step; where the judge itself runs out of device memory (the runs sharing a
        GPU hold it too), judged again once everything it held is freed, then reported as the
        machine's failure, never the candidate's."""
        self._judged += 1
        for _attempt in range(JUDGE_MEMORY_ATTEMPTS):
            try:
                return self._judge_once(extension_dir)
            except judge_mod.OUT_OF_MEMORY as exhausted:
                full = exhausted
                judge_mod.release_cached_memory(self.device)
        error = f"the judge ran out of device memory in {JUDGE_MEMORY_ATTEMPTS} attempts: {full}"
        failed = verify_mod.VerifyResult(ok=False, error=error, failed_by=failure.INFRASTRUCTURE)
        return {**failed.to_dict(), "phases_s": {}}, None

    def _judge_once(self, extension_dir: str) -> tuple[dict, profile_mod.Measurement | None]:
        """Trials, then timing; a measurement the machine disturbed (drift, or a clock that
        disagrees) is taken again with a fresh candidate process, up to MEASUREMENT_ATTEMPTS in
        all, before the violation stands (a busy neighbour passes, a cheat does not)."""
        judge = Judge(self.device, self.protocol)
        phases = Phases()
        with ExitStack() as held:
            try:
                with phases("candidate ready"):  # prepared ahead, so rarely waited for
                    runner = self._ready_candidate()
                held.callback(runner.close)  # whatever happens before its attempt ends
                if _PREPARE_DURING_STEPS[self.device]:
                    self._get_ready()  # the next candidates' (or this one's retry)
                with phases("reference ready"):
                    self._reference_up()
                with phases("lock wait"):
                    held.enter_context(gpu_lock.hold(self.device, self._step_name()))
                verdict, measured, attempts = self._judged_attempts(
                    judge, runner, extension_dir, phases
                )
                result = {**verdict.to_dict(), "measurement_attempts": attempts}
                if self._screening and measured is not None:
                    result["screened"] = True
            except RunnerError as failed:  # the candidate's load raised, or the reference
                result, measured = self._failure(failed), None
            finally:
                with phases("release"):  # the judge's buffers, and the reference's views of them
                    judge.free()
                    if self._reference:
                        self._release_reference()
        result["phases_s"] = phases.seconds
        return result, measured

    def _judged_attempts(self, judge: Judge, runner, extension_dir: str, phases: Phases):
        with phases("reference start"):
            reference = self._reference_runner()
        verdict, measured = None, None
        for attempt in range(MEASUREMENT_ATTEMPTS):  # returns how many it took
            if attempt:
                with phases("candidate ready"):
                    runner = self._ready_candidate()
            try:
                alone = self._eager_alone(judge, reference, phases, fresh=attempt > 0)
                with phases("candidate load"):
                    candidate = runner_process.load_candidate(
                        runner, extension_dir, self.root, self.device, self.protocol
                    )
                candidate.bound_calls(*self._call_bound(alone))
                with phases("trials"):
                    verdict = verdict or verify_mod.trials(judge, reference, candidate)
                if not verdict.ok:
                    return verdict, None, attempt + 1
                budget_s = SCREENING_BUDGET_S if self._screening else None
                with phases("timing"):
                    measured = profile_mod.time_candidate(
                        judge, reference, candidate, alone, budget_s=budget_s
                    )
                clock_record.append(self._measured_what, self.device, measured)
            finally:
                with phases("candidate stop"):
                    runner.close()
                    shutil.rmtree(runner.stage, ignore_errors=True)
            if not measured.disturbed(self.protocol):
                break
        return verdict, measured, attempt + 1

    def _call_bound(self, alone: Batches) -> tuple[float, str]:
        """How long a candidate's call may take in this step, and why (SLOWDOWN_LIMIT)."""
        eager_ms = alone.median_ms if alone.times_ms else 0.0
        bound = min(
            self.protocol.step_timeout_s, max(CALL_FLOOR_S, SLOWDOWN_LIMIT * eager_ms / 1e3)
        )
        why = (
            f"a call may take {SLOWDOWN_LIMIT}x eager's {eager_ms:.3g} ms, at least "
            f"{CALL_FLOOR_S:.0f} s: a hang, an infinite loop, or a kernel far too slow to be judged"
        )
        return bound, why

    def _problem_name(self) -> str:
        """The problem as the database and results files know it: its source's sha256."""
        return "problem " + source_sha256(self._problem_path.read_text())[:12]

    def _step_name(self) -> str:
        """What this step is, for the GPU lock's holder note and the log."""
        return f"judged step {self._judged} of {self._problem_name()}"

    def _measured_what(self) -> dict:
        """Which problem and sources a measurement was of, by digest (clock_record)."""
        problem = {"model.py": self._problem_path.read_text()}
        return {
            "problem": sources_digest(problem)[:12],
            "sources": sources_digest(self.sources())[:12],
        }

    def _eager_alone(self, judge: Judge, reference, phases: Phases, fresh: bool) -> Batches:
        """Eager timed with no candidate code loaded, what drift is judged against: measured on
        a session's first judged step, again once EAGER_ALONE_FRESH_S have passed, and afresh
        before a disturbed measurement is retried (so a candidate that slows eager down meets
        an eager timed just before it, as on a first step)."""
        now = time.monotonic()
        if fresh or self._alone is None or now - self._alone[0] > EAGER_ALONE_FRESH_S:
            with phases("eager alone"):  # before the candidate's code is loaded
                self._alone = (now, profile_mod.eager_alone(judge, reference))
        return self._alone[1]

    def _get_ready(self) -> None:
        """Starts what the next judged steps need, in the background: candidate processes (up
        to _pool_size) and the reference runner. Called when sources are compiled,
        after a profile, and on a GPU host when a step took its process
        (_PREPARE_DURING_STEPS). Where one cannot start, the step starts it again and reports
        why."""
        try:
            self._start_fork_server()
            server = self._server(wait=False)
            if server is None and self._forking:
                return  # still importing: a step forks what it needs once it is up
            while len(self._prepared) < self._pool_size():
                self._prepare_candidate(server)
            if self._reference is None:
                self._begin_reference(server)
        except (RunnerError, sandbox.SandboxUnavailable):
            pass

    def _start_fork_server(self) -> None:
        """The session's fork server (judge/fork_server.py), starting in the background: it sees
        the workspace, every candidate's stage and the reference's folder, and each runner
        forked from it only its own part of them."""
        if self._fork_server is not None or not self._forking:
            return
        if not sandbox.confinement()["confined"]:
            self._forking = False  # unconfined development runs start each runner
            return
        stages = self._base / "candidates"
        stages.mkdir(exist_ok=True)
        shown = (self.root, stages, self._problem_path.parent)
        if seed := compiler_seed.ready(self.device):  # for the reference's torch.compile
            shown += (seed,)
        view = sandbox.View(readable=shown)
        self._fork_server = runner_process.start_fork_server(
            self.device, view, self.root, self.protocol.step_timeout_s
        )

    def _server(self, wait: bool) -> ForkServer | None:
        """The fork server if it is ready to fork (with `wait`, once its imports are done),
        else None: runners start afresh once it failed."""
        server = self._fork_server
        if server is None or not self._forking:
            return None
        try:
            if server.broken:
                raise ForkServerFailed("the fork server stopped answering")
            if not wait and not server.answered():
                return None
            server.ready(self.protocol.step_timeout_s)
            return server
        except ForkServerFailed as failed:
            self._drop_fork_server(str(failed))
            return None

    def _drop_fork_server(self, why: str) -> None:
        """Forks no more; the server is closed with the session (closing it now would end the
        runners it forked, the reference among them)."""
        self._forking, self.fork_server_why = False, why

    def _pool_size(self) -> int:
        """Processes kept ready: the device's pool, or no more than the candidates the caller
        said are still to come."""
        pool = _PREPARED_PROCESSES[self.device]
        if self._candidates is None:
            return pool
        return max(0, min(pool, self._candidates - self._judged))

    def _prepare_candidate(self, server: ForkServer | None) -> None:
        """One more candidate process getting ready, in a stage folder of its own
        (runner_process.prepare_candidate), forked from `server` where it is given."""
        self._stages += 1
        stage = self._base / "candidates" / str(self._stages)
        stage.mkdir(parents=True)
        self._prepared.append(
            runner_process.prepare_candidate(
                self.root, stage, self.device, self.protocol.step_timeout_s, server=server
            )
        )

    def _ready_candidate(self) -> runner_process.RunnerProcess:
        """The oldest prepared candidate process, once it has answered, taken for one candidate.
        One that died before any candidate code ran is the harness's failure, never the
        candidate's: another is tried once before it is reported so."""
        error = None
        for _attempt in range(2):
            if not self._prepared:
                try:
                    self._start_fork_server()
                    # closes what it started if that failed
                    self._prepare_candidate(self._server(wait=True))
                except RunnerError as exc:
                    error = exc
                    continue
            runner = self._prepared.pop(0)
            try:
                runner.settle()
                if runner.proc.poll() is not None:  # ready once, then ended before its step
                    raise RunnerDied(HARNESS, "the prepared candidate process ended")
                return runner
            except RunnerError as exc:
                runner.close()
                error = exc
                if runner.forked:  # the retry, and the runners after it, start afresh
                    self._drop_fork_server(f"a forked candidate process failed: {exc}")
        raise RunnerDied(HARNESS, f"a candidate process could not get ready: {error}")

    def _failure(self, failed: RunnerError) -> dict:
        """A reference that fails is not the candidate's fault, and the error says so. A
        candidate process that ends while loading (exits, kills itself) is `process_exit`, as
        it is mid-trial."""
        prefix = "the reference failed: " if failed.role == "reference" else ""
        result = verify_mod.VerifyResult(
            ok=False, error=prefix + str(failed), failed_by=failure.of_runner_error(failed)
        )
        if failed.role == "candidate" and isinstance(failed, RunnerDied):
            result.violations.append(Violation("process_exit", f"while loading: {failed}"))
        return result.to_dict()

    def _reference_runner(self) -> runner_process.RunnerProcess:
        """The session's reference runner with the problem loaded (under the GPU lock: loading
        builds the model on the device)."""
        try:
            if self._reference is None:
                self._begin_reference(self._server(wait=True))
            if not self._reference_loaded:
                runner_process.load_reference(
                    self._reference, self._problem_path, self.device, self.protocol
                )
                self._reference_loaded = True
        except RunnerError as exc:
            self._drop_reference()
            raise RunnerFailed("reference", f"could not load the problem: {exc}") from None
        return self._reference

    def _reference_up(self) -> None:
        """Waits for the reference runner's process to be up outside the GPU lock (seconds on
        a GPU host: its interpreter and torch); only loading the problem is under it. One
        that failed to start is started again, and its failure reported, by the step."""
        if self._reference_loaded:
            return
        try:
            if self._reference is None:
                self._begin_reference(self._server(wait=True))
            self._reference.settle()
        except RunnerError:
            self._drop_reference()

    def _begin_reference(self, server: ForkServer | None) -> None:
        """The session's reference runner, starting up in the background (forked from `server`
        where it is given)."""
        if self._reference is None:
            self._reference = runner_process.begin_reference(
                self._problem_path, self.device, self.protocol.step_timeout_s, server=server
            )
            self._reference_loaded = False

    def _drop_reference(self) -> None:
        if self._reference:
            self._reference.close()
        self._reference = None

    def _release_reference(self) -> None:
        try:
            self._reference.call("release")
        except RunnerError:
            self._drop_reference()

    def profile(self) -> dict:
        verdict, measured = self._verify()
        if not verdict["ok"] or measured is None:
            return profile_mod.ProfileResult(
                ok=False, error="not profiled: the candidate did not verify"
            ).to_dict()
        phases = Phases()
        with phases("baselines"):  # measured on first use (or ahead), under the GPU lock
            self._wait_for_baselines_ahead()
            try:
                base = self._baselines()
            except ProblemError as exc:
                failed_by = (
                    exc.failed_by
                    if isinstance(exc, profile_mod.BaselinesFailed)
                    else failure.PROBLEM
                )
                return profile_mod.ProfileResult(
                    ok=False, error=str(exc), failed_by=failed_by
                ).to_dict()
        result = profile_mod.result(base, measured, self.device, self.protocol).to_dict()
        if verdict.get("screened"):  # timed for SCREENING_BUDGET_S: a tune call's ranking
            result["screened"] = True
        # the judged step that timed it, and the baselines (cached after a problem's first)
        result["phases_s"] = {**(verdict.get("phases_s") or {}), **phases.seconds}
        self._get_ready()  # for the next candidate, while this one's verdict is read
        return result

    def _baselines(self) -> dict:
        return profile_mod.baselines(
            self._problem_path,
            self.device,
            self.protocol,
            self.workdir,
            server=self._server(wait=True),
        )

    def _measure_baselines_ahead(self) -> None:
        """The problem's baselines, measured once in the background while sources compile
        (_BASELINES_AHEAD); the first profile waits for them. Where they failed, the profile
        measures them again itself and reports why."""
        if not self._baselines_ahead or self._ahead is not None:
            return
        self._ahead = threading.Thread(target=self._baselines_quietly, name="baselines-ahead")
        self._ahead.start()

    def _baselines_quietly(self) -> None:
        try:
            self._baselines()
        except Exception:  # noqa: BLE001 - the profile measures again and says why
            pass

    def _wait_for_baselines_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.join()

    def graph(self) -> dict:
        """The problem's Graph IR (docs/fusion.md), captured once per session (model.py is
        read-only) in the session's reference runner: its process starts outside the GPU lock
        (forked where the fork server is up) and stays for the judged steps; only loading the
        problem and lowering it on the device hold the lock. A problem that cannot be loaded
        gives an IR with no nodes and the reason."""
        if self._graph is None:
            self._graph = self._capture_graph()
        return self._graph

    def _capture_graph(self) -> dict:
        try:
            check_source(self.read_file("model.py"))
        except ProblemError as exc:
            return graph_mod.empty_graph(self.device, [str(exc)])
        try:
            self._start_fork_server()  # the reference forks from it, and every candidate later
        except (RunnerError, sandbox.SandboxUnavailable):
            pass  # the reference starts afresh, as where there is no server
        self._reference_up()
        try:
            with gpu_lock.hold(self.device, f"graph capture of {self._problem_name()}"):
                return self._reference_runner().call("graph")
        except RunnerError as exc:
            return graph_mod.empty_graph(self.device, [f"graph: {exc}"])

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
        self._wait_for_baselines_ahead()  # they end in the cache, and use the fork server
        for prepared in self._prepared:
            prepared.close()
        self._prepared = []
        self._drop_reference()
        if self._fork_server is not None:
            self._fork_server.close()
            self._fork_server = None
        if self._owns_root:
            shutil.rmtree(self._base, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def verdict_ok(verdict: dict) -> bool:
    return bool(verdict.get("profile") and verdict["profile"]["ok"])
