from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from webapp.problems.models import Visibility


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # `error` says why
    CANCELLED = "cancelled"


ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)
# What a succeeded run whose best verified kernel is slower than eager shows instead of a green
# "succeeded": it did its work and its kernel downloads, but found nothing to use. A label, not
# a status: it is re-graded and counts as correct on a board like any succeeded run.
NOTHING_FASTER = "finished: nothing faster"


class RunKind(models.TextChoices):
    AGENT = "agent"  # an agent configuration writes the kernels
    SUBMISSION = "submission"  # a person submitted them (submitted_sources); the worker checks


class RunQuerySet(models.QuerySet):
    def visible_to(self, user) -> RunQuerySet:
        """A run is as visible as its problem: the owner's own, and every run on a public
        problem."""
        public = Q(problem__visibility=Visibility.PUBLIC)
        if not user.is_authenticated:
            return self.filter(public)
        return self.filter(public | Q(owner=user))


class Run(models.Model):
    problem = models.ForeignKey("problems.Problem", models.CASCADE, related_name="runs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="runs")
    agent = models.CharField(max_length=100)  # an agent configuration's name (agents.toml)
    gpu_type = models.CharField(max_length=40)  # names the worker queue, e.g. "h100", "cpu"
    protocol = models.CharField(max_length=40, default="loose")
    kind = models.CharField(max_length=12, choices=RunKind.choices, default=RunKind.AGENT)
    # A submission's files (model_new.py, kernels/…), as the person sent them.
    submitted_sources = models.JSONField(default=dict, blank=True)
    # Set when the run is one problem of a suite evaluation (one run per problem, fixed budget).
    evaluation = models.ForeignKey(
        "suites.Evaluation", models.CASCADE, null=True, blank=True, related_name="runs"
    )
    max_turns = models.PositiveIntegerField(null=True, blank=True)  # caps the config's budget
    # Where an imported run was measured ("<origin>/run/<id>", leaderboard.results_file); empty
    # for work done here. An imported run is final: no worker ever takes it.
    imported_from = models.CharField(max_length=300, blank=True, db_index=True)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED)
    worker = models.CharField(max_length=200, blank=True)  # who claimed it (host:pid)
    best_candidate = models.ForeignKey(
        "runs.Candidate", models.SET_NULL, null=True, blank=True, related_name="+"
    )
    best_speedup_vs_compile = models.FloatField(null=True, blank=True)
    best_speedup_vs_eager = models.FloatField(null=True, blank=True)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost_dollars = models.FloatField(default=0.0)
    gpu_seconds = models.FloatField(default=0.0)  # time the run held the GPU lock
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)  # claims so far; >1 after a lost worker
    # Touched by the running worker every few seconds; a stale one means the worker is gone.
    heartbeat = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["status", "gpu_type"], name="run_status_gpu_type")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.problem_id} ({self.agent} on {self.gpu_type})"

    def is_visible_to(self, user) -> bool:
        return self.problem.visibility == Visibility.PUBLIC or (
            user.is_authenticated and self.owner_id == user.pk
        )

    @property
    def headline(self) -> dict:
        """The best speedups pages show for it: the re-grade's once it has timed the candidate
        and ranked it, or held it only because it disagreed with the run's own (the figure
        that counts), else the run's own; `regraded` says which. (The grade is read through
        the reverse relation: runs sits below the leaderboard.) Lists select_related("grade")."""
        grade = getattr(self, "grade", None)  # none yet: RelatedObjectDoesNotExist
        counted = (
            grade is not None
            and grade.speedup_vs_eager is not None
            and (grade.status == "ranked" or grade.disagrees)
        )
        if counted:
            eager, compile_ = grade.speedup_vs_eager, grade.speedup_vs_compile
        else:
            eager, compile_ = self.best_speedup_vs_eager, self.best_speedup_vs_compile
        return {"speedup_vs_eager": eager, "speedup_vs_compile": compile_, "regraded": counted}

    @property
    def found_nothing_faster(self) -> bool:
        """Succeeded, and its best kernel (as counted: `headline`) is slower than eager."""
        if self.status != RunStatus.SUCCEEDED:
            return False
        versus_eager = self.headline["speedup_vs_eager"]
        return versus_eager is not None and versus_eager < 1.0

    @property
    def outcome(self) -> str:
        """Its status as pages show it (NOTHING_FASTER for a succeeded run that found nothing
        faster than eager)."""
        return NOTHING_FASTER if self.found_nothing_faster else self.status

    @property
    def outcome_class(self) -> str:
        """The badge's CSS suffix (s-...)."""
        return "nothing-faster" if self.found_nothing_faster else self.status

    def queue_position(self) -> int | None:
        """1 for the next run a worker of its GPU type takes, 2 for the one after; None unless
        queued. From the database: the queued runs of that GPU type created before it."""
        if self.status != RunStatus.QUEUED or self.imported_from:
            return None
        earlier = Run.objects.filter(
            status=RunStatus.QUEUED, gpu_type=self.gpu_type, pk__lt=self.pk
        )
        return earlier.filter(imported_from="").count() + 1

    def claim(self, worker: str = "") -> bool:
        """Move a queued run to running for this worker. False when another worker got there
        first (or the run was cancelled): the conditional update matched no row."""
        now = timezone.now()
        claimed = Run.objects.filter(pk=self.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING,
            worker=worker,
            started=now,
            heartbeat=now,
            attempts=models.F("attempts") + 1,
        )
        if claimed:
            self.refresh_from_db(fields=["status", "worker", "started", "heartbeat", "attempts"])
        return bool(claimed)


class EventKind(models.TextChoices):
    THOUGHT = "thought"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    CANDIDATE = "candidate"
    STATUS = "status"
    ERROR = "error"


class TraceEvent(models.Model):
    """One step of a run's trace, numbered 1, 2, … per run with no gaps."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=12, choices=EventKind.choices)
    payload = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_seq_per_run")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.kind}"


class Candidate(models.Model):
    """A set of kernel sources the agent produced, with the harness's verdict on it."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="candidates")
    seq = models.PositiveIntegerField()  # 1, 2, … per run, in the order they were produced
    sources = models.JSONField(default=dict)  # workspace path -> text (model_new.py, kernels/…)
    verdict = models.JSONField(default=dict, blank=True)  # the harness's verdict, as-is
    speedup_vs_compile = models.FloatField(null=True, blank=True)
    verified = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="candidate_seq_per_run")]

    def __str__(self) -> str:
        return f"{self.run_id}/candidate {self.seq}"


class ModelKey(models.Model):
    """A person's own API key for one agent (a frontier API): their runs of that agent use it
    instead of the operator's. Stored encrypted (webapp/runs/secrets.py); only its last four
    characters are kept in the clear, so that the owner can tell keys apart."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="model_keys")
    agent = models.CharField(max_length=100)
    encrypted = models.TextField()
    last4 = models.CharField(max_length=4)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "agent"], name="one_model_key_per_agent")
        ]

    def __str__(self) -> str:
        return f"{self.agent} key …{self.last4} ({self.owner})"


class HealthLevel(models.TextChoices):
    OK = "ok"
    WARN = "warn"  # runs are possible but poor (e.g. the model answers without tool calls)
    FAIL = "fail"  # every run would end at once: runs of this agent are refused
    UNUSABLE = "unusable"  # no check possible here (e.g. no operator key): nothing refused


class AgentHealth(models.Model):
    """The latest preflight check of one agent (agent.preflight, run on a worker, where model
    servers are reached from): what staff see, and what refuses runs of an agent that fails."""

    agent = models.CharField(max_length=100, unique=True)
    level = models.CharField(max_length=10, choices=HealthLevel.choices)
    summary = models.TextField()  # the findings that decided the level, in one paragraph
    report = models.JSONField(default=dict)  # agent.preflight.CheckReport.to_dict()
    checked = models.DateTimeField()
    worker = models.CharField(max_length=200, blank=True)

    # The report of a check that could not run because the worker has no operator key for the
    # agent: runs of people without their own key are refused (webapp.runs.agent_readiness).
    NO_OPERATOR_KEY = {"operator_key": False}

    def __str__(self) -> str:
        return f"{self.agent}: {self.level}"

    @property
    def operator_key_missing(self) -> bool:
        return self.report.get("operator_key") is False
