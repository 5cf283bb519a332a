from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token for the REST API. Only its hash is stored: the plaintext is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    # sha256 hex of the plaintext. A plain hash suffices: tokens are 256 random bits, not
    # passwords, so there is nothing to brute-force and lookups stay a single indexed query.
    key_hash = models.CharField(max_length=64, unique=True)
    # The plaintext's first characters, so a user can tell tokens apart in lists.
    prefix = models.CharField(max_length=12)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
