"""Suites: named, public sets of problems that every entrant is measured on the same way.

A Suite groups problems (SuiteProblem keeps each one's name and place in the folder it was
imported from). Baseline holds eager and torch.compile times of one problem on one GPU type under
one protocol, measured by a worker through the harness and stored with the environment. An
Evaluation is one agent configuration run once on every problem of a suite, under a fixed budget.
A ReportedResult is a number from a paper: shown, marked as reported, never ranked.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.problems.models import ProblemStatus


class Suite(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    level = models.PositiveSmallIntegerField(null=True, blank=True)  # KernelBench's level, if any
    protocol = models.CharField(max_length=40, default="loose")  # every result is judged under it
    source_path = models.CharField(max_length=500, blank=True)  # the folder it was imported from
    description = models.TextField(blank=True)
    problems = models.ManyToManyField(
        "problems.Problem", through="SuiteProblem", related_name="suites"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def valid_problems(self):
        return self.problems.filter(status=ProblemStatus.VALID)

    def sources_missing(self) -> str:
        """Why no worker can run this suite's valid problems here, or "" when one can: those
        held by sha256 alone (imported from a results file without their sources)."""
        problems = self.valid_problems().filter(source="").order_by("suite_entries__position")
        titles = list(problems.values_list("title", flat=True))
        if not titles:
            return ""
        shown = ", ".join(titles[:5]) + (f" and {len(titles) - 5} more" if len(titles) > 5 else "")
        return (
            f"suite {self.name} has {len(titles)} valid problems without their source here "
            f"({shown}): they came from a results file; attach the sources with "
            f"`manage.py import_suite FOLDER --name {self.name}` (nothing validated is validated "
            "again), then ask again"
        )


class SuiteProblem(models.Model):
    suite = models.ForeignKey(Suite, models.CASCADE, related_name="entries")
    problem = models.ForeignKey("problems.Problem", models.CASCADE, related_name="suite_entries")
    name = models.CharField(max_length=200)  # the file's stem, e.g. "19_ReLU"
    position = models.PositiveIntegerField()  # order in the folder (KernelBench's index first)
    # Where a synthesized problem came from (webapp.suites.synthesis): composer, seed, index, its
    # seed operators and shapes, and each filter's result. Empty for an imported file.
    provenance = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["suite", "position"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "name"], name="suite_problem_name"),
            models.UniqueConstraint(fields=["suite", "problem"], name="suite_problem_once"),
        ]

    def __str__(self) -> str:
        return f"{self.suite_id}/{self.name}"


class Baseline(models.Model):
    """The times every entrant on this problem, GPU type and protocol is compared with."""

    problem = models.ForeignKey("problems.Problem", models.CASCADE, related_name="baselines")
    gpu_type = models.CharField(max_length=40)
    protocol = models.CharField(max_length=40)
    eager_ms = models.FloatField(null=True, blank=True)
    compile_ms = models.FloatField(null=True, blank=True)  # torch.compile, default mode
    compile_max_autotune_ms = models.FloatField(null=True, blank=True)
    sol_ms = models.FloatField(null=True, blank=True)  # the protocol's speed-of-light floor
    # Each measurement's times, in order: the stored times are the fastest of them (see
    # gpu_workers.baseline_measurement for why).
    measurements = models.JSONField(default=list, blank=True)
    environment = models.JSONField(default=dict, blank=True)  # GPU, driver, CUDA, torch, clocks
    error = models.TextField(blank=True)  # why the last measurement failed
    requested = models.DateTimeField(null=True, blank=True)
    # fresh processes the last request asked for, so a request resent after a lost task is the same
    repeats = models.PositiveSmallIntegerField(default=1)
    measured = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["problem", "gpu_type", "protocol"]
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "gpu_type", "protocol"], name="baseline_per_gpu_protocol"
            )
        ]

    def __str__(self) -> str:
        return f"baseline of {self.problem_id} on {self.gpu_type} ({self.protocol})"


class Evaluation(models.Model):
    """One agent configuration, once on every valid problem of a suite: one run per problem."""

    suite = models.ForeignKey(Suite, models.CASCADE, related_name="evaluations")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    agent = models.CharField(max_length=100)
    gpu_type = models.CharField(max_length=40)
    protocol = models.CharField(max_length=40)
    max_turns = models.PositiveIntegerField(null=True, blank=True)  # the fixed budget, if capped
    # The configuration's identity when it started (agent.config.AgentConfig.identity()).
    agent_identity = models.JSONField(default=dict, blank=True)
    # Where an imported evaluation was run ("<origin>/evaluation/<id>"); empty for local work.
    imported_from = models.CharField(max_length=300, blank=True, db_index=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.agent} on {self.suite_id} ({self.gpu_type}, {self.protocol})"


class ReportedResult(models.Model):
    """A suite-level result as a paper reports it. Shown apart, marked, never ranked."""

    suite = models.ForeignKey(Suite, models.CASCADE, related_name="reported_results")
    entrant = models.CharField(max_length=200)  # e.g. "CUDA Agent (ByteDance Seed, 2026)"
    gpu = models.CharField(max_length=100, blank=True)  # the GPU as the paper names it
    protocol = models.CharField(max_length=200, blank=True)  # the paper's tolerance, in words
    citation = models.CharField(max_length=500)
    url = models.URLField(blank=True)
    correct_rate = models.FloatField(null=True, blank=True)
    fast_1_0_vs_compile = models.FloatField(null=True, blank=True)
    fast_1_0_vs_eager = models.FloatField(null=True, blank=True)
    geomean_speedup_vs_compile = models.FloatField(null=True, blank=True)
    geomean_speedup_vs_eager = models.FloatField(null=True, blank=True)
    note = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["suite", "entrant"]

    def __str__(self) -> str:
        return f"{self.entrant} on {self.suite_id} (reported)"
