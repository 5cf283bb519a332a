"""Secrets at rest: a person's model API keys are stored encrypted (Fernet: AES-128-CBC with an
HMAC), so a copy of the database, a backup or an admin page holds no usable key.

The encryption key is $KERNELARENA_SECRETS_KEY (a Fernet key: `python -c "from
cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`), or else derived
from SECRET_KEY. Changing it makes the saved keys unreadable: their owners are told to save them
again, and nothing else is lost.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class UnreadableSecret(Exception):
    """A stored secret the current encryption key cannot open."""


def _fernet() -> Fernet:
    key = settings.SECRETS_KEY
    if not key:
        digest = hashlib.sha256(b"kernelarena model keys\0" + settings.SECRET_KEY.encode()).digest()
        key = base64.urlsafe_b64encode(digest).decode()
    return Fernet(key)


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as error:
        raise UnreadableSecret("the server's secrets key changed since it was saved") from error
