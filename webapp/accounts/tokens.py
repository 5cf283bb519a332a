"""Issuing API tokens and finding the user a token belongs to."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from webapp.accounts.models import ApiToken

TOKEN_PREFIX = "ka_"


def hash_token(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def issue_token(user: AbstractBaseUser, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for `user`; returns it and its plaintext, which is never stored or shown
    again."""
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, key_hash=hash_token(plaintext), prefix=plaintext[:10]
    )
    return token, plaintext


def user_for_token(plaintext: str) -> AbstractBaseUser | None:
    """The active user owning this token, or None. Records when the token was last used."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=hash_token(plaintext), user__is_active=True)
        .first()
    )
    if token is None:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
    return token.user
