from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from gpu_workers.harness.problem_source import source_sha256


class Visibility(models.TextChoices):
    PRIVATE = "private"
    PUBLIC = "public"


class ProblemStatus(models.TextChoices):
    PENDING = "pending"  # stored, validation not started
    VALIDATING = "validating"  # a worker runs it in the sandbox
    VALID = "valid"
    REJECTED = "rejected"  # `reasons` says why


class ProblemQuerySet(models.QuerySet):
    def update(self, **fields) -> int:
        """As QuerySet.update, moving `updated` too: auto_now acts only on save(), and every
        change of state after the upload (a worker's claim, its verdict, a reaped validation,
        a synthesized problem published) is a conditional update."""
        fields.setdefault("updated", timezone.now())
        return super().update(**fields)

    def visible_to(self, user) -> ProblemQuerySet:
        """Public problems and the user's own."""
        if not user.is_authenticated:
            return self.filter(visibility=Visibility.PUBLIC)
        return self.filter(Q(visibility=Visibility.PUBLIC) | Q(owner=user))

    def filtered(self, user, status: str | None = None, mine: bool = False) -> ProblemQuerySet:
        """The list's filters (the problem list page and GET /api/problems): a state, and only
        the user's own."""
        problems = self.filter(status=status) if status is not None else self
        return problems.filter(owner=user) if mine and user.is_authenticated else problems


class Problem(models.Model):
    """An op in KernelBench format. Untrusted code: it only ever runs in a worker's sandbox."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="problems")
    title = models.CharField(max_length=200)
    source = models.TextField()
    sha256 = models.CharField(max_length=64, editable=False)
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.PRIVATE
    )
    status = models.CharField(
        max_length=12, choices=ProblemStatus.choices, default=ProblemStatus.PENDING
    )
    reasons = models.JSONField(default=list, blank=True)  # why it was rejected, one per item
    # The validation report, measured on the worker that validated it.
    eager_ms = models.FloatField(null=True, blank=True)
    compile_ms = models.FloatField(null=True, blank=True)  # torch.compile, default mode
    flops = models.BigIntegerField(null=True, blank=True)
    bytes_moved = models.BigIntegerField(null=True, blank=True)  # minimum bytes read + written
    # The speed-of-light floor on the validating GPU type: max(FLOPs / peak, bytes / bandwidth).
    sol_ms = models.FloatField(null=True, blank=True)
    validated_on = models.CharField(max_length=40, blank=True)  # the GPU type, e.g. "h100", "cpu"
    # When a worker last started validating it: its time limit counts from here.
    validation_started = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = ProblemQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "sha256"], name="problem_unique_per_owner")
        ]
        # The validation queue's positions count the pending problems.
        indexes = [models.Index(fields=["status"], name="problem_status")]

    def __str__(self) -> str:
        return self.title

    def save(self, *args, **kwargs) -> None:
        # A problem imported from a results file without its source (KernelBench's files are
        # not ours to publish) keeps the file's sha256 until the real source is attached.
        if self.source or not self.sha256:
            self.sha256 = source_sha256(self.source)
        super().save(*args, **kwargs)

    def is_visible_to(self, user) -> bool:
        return self.visibility == Visibility.PUBLIC or (
            user.is_authenticated and self.owner_id == user.pk
        )

    def queue_position(self) -> int | None:
        """1 for the next problem a validation worker takes, 2 for the one after; None unless
        pending. From the database: the pending problems sent before it (every problem is
        validated on one GPU type, so they share one queue)."""
        if self.status != ProblemStatus.PENDING:
            return None
        earlier = Problem.objects.filter(status=ProblemStatus.PENDING, pk__lt=self.pk)
        return earlier.exclude(source="").count() + 1
