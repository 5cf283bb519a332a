"""A Grade is the isolated re-grade of a run's best candidate: the only result a board counts.

After a run ends with a verified candidate, a worker verifies and times that candidate again in
a fresh session (a new sandboxed process) with secret seeds, holding the GPU lock
(gpu_workers.regrade). A clean result is `ranked`; a violation, a failed check on the secret
seeds or a time under the speed-of-light floor is held `under_review`: shown, never ranked.
"""

from __future__ import annotations

import uuid

from django.db import models


class GradeStatus(models.TextChoices):
    PENDING = "pending"  # waiting for a worker
    RANKED = "ranked"  # verified and timed again, clean: it counts
    UNDER_REVIEW = "under_review"  # `reasons` says why; never ranked


# The re-grade's measured numbers, named as in the harness's profile verdict.
MEASURED_FIELDS = (
    "candidate_ms",
    "eager_ms",
    "compile_ms",
    "compile_max_autotune_ms",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "sol_ms",
    "sol_fraction",
)


class Grade(models.Model):
    run = models.OneToOneField("runs.Run", models.CASCADE, related_name="grade")
    candidate = models.ForeignKey("runs.Candidate", models.CASCADE, related_name="grades")
    status = models.CharField(
        max_length=14, choices=GradeStatus.choices, default=GradeStatus.PENDING
    )
    reasons = models.JSONField(default=list, blank=True)  # why it is under review
    verdict = models.JSONField(default=dict, blank=True)  # the re-grade's harness verdict
    candidate_ms = models.FloatField(null=True, blank=True)
    eager_ms = models.FloatField(null=True, blank=True)
    compile_ms = models.FloatField(null=True, blank=True)
    compile_max_autotune_ms = models.FloatField(null=True, blank=True)
    speedup_vs_eager = models.FloatField(null=True, blank=True)
    speedup_vs_compile = models.FloatField(null=True, blank=True)
    sol_ms = models.FloatField(null=True, blank=True)
    sol_fraction = models.FloatField(null=True, blank=True)
    max_rel_err = models.FloatField(null=True, blank=True)
    secret_seeds = models.PositiveSmallIntegerField(default=0)  # how many; the seeds stay secret
    # The run's own timing of the candidate beside the re-grade's, when both exist
    # (gpu_workers.regrade): {"limit", "run": figures, "regrade": [figures of each
    # measurement], "agrees"}. Measured again where they disagree; held if they still do.
    agreement = models.JSONField(default=dict, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    graded = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["status"], name="grade_status")]

    def __str__(self) -> str:
        return f"grade of run {self.run_id}: {self.status}"

    @property
    def disagrees(self) -> bool:
        """The re-grade's time and the run's own differ beyond the protocol's repeatability."""
        return self.agreement.get("agrees") is False

    def queue_position(self) -> int | None:
        """1 for the next re-grade a grade worker of the run's GPU type takes; None unless
        pending. From the database: the pending grades of that GPU type made before it (baselines
        share the grade worker but are the operator's, and are not counted)."""
        if self.status != GradeStatus.PENDING:
            return None
        earlier = Grade.objects.filter(
            status=GradeStatus.PENDING, run__gpu_type=self.run.gpu_type, pk__lt=self.pk
        )
        return earlier.count() + 1


class Instance(models.Model):
    """This database's identity, made once: a results file says which database exported it, so
    importing a database's own export changes nothing, and two hosts of one name (every lent
    machine is "vm") never give their runs the same key (webapp.leaderboard.results_file)."""

    key = models.CharField(max_length=32, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    @classmethod
    def key_here(cls) -> str:
        instance = cls.objects.order_by("id").first()
        if instance is None:
            instance = cls.objects.create(key=uuid.uuid4().hex[:16])
        return instance.key
