"""Encryption of endpoint API keys at rest.

A key stored in plain text would leak with every database dump and backup.
Fernet gives authenticated encryption; the key comes from the environment
(`LOREMASTER_ENCRYPTION_KEY`) or, on a laptop with no configuration, is
derived from SECRET_KEY so nothing needs setting up.
"""

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@lru_cache(maxsize=1)
def _fernet() -> Fernet:
    configured = settings.ENCRYPTION_KEY
    if configured:
        return Fernet(configured.encode())
    digest = hashlib.sha256(f"loremaster-api-keys:{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plaintext: str) -> str:
    if not plaintext:
        return ""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """The stored key, or "" when it cannot be read (the encryption key changed);
    the endpoint then answers 401 and the reader is told to re-enter the key."""
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return ""
