"""Encryption of endpoint API keys at rest.

A key stored in plain text would leak with every database dump and backup.
Fernet gives authenticated encryption. New values are written with
`LOREMASTER_ENCRYPTION_KEY`; a `MultiFernet` also reads values written with
the keys in `LOREMASTER_ENCRYPTION_OLD_KEYS` and with the key derived from
SECRET_KEY, which is what a laptop with no configuration uses and what every
install used before it set a key of its own. So a key is rotated by setting
the new one, moving the old one to the old keys, and running
`manage.py reencrypt_api_keys`; after that the old key can be dropped.
"""

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


def _derived_key(secret_key: str) -> bytes:
    digest = hashlib.sha256(f"loremaster-api-keys:{secret_key}".encode()).digest()
    return base64.urlsafe_b64encode(digest)


@lru_cache(maxsize=4)
def _fernet_for(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    fernets = [Fernet(key.encode()) for key in keys]
    fernets.append(Fernet(_derived_key(secret_key)))
    return MultiFernet(fernets)


def _fernet() -> MultiFernet:
    """The keys, newest first, as configured now (a test may change them)."""
    keys = tuple(key for key in (settings.ENCRYPTION_KEY, *settings.ENCRYPTION_OLD_KEYS) if key)
    return _fernet_for(keys, settings.SECRET_KEY)


def encrypt(plaintext: str) -> str:
    if not plaintext:
        return ""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """The stored key, or "" when no configured key reads it (the key was
    dropped); the endpoint then answers 401 and the reader is told to re-enter it."""
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return ""


def reencrypt(token: str) -> str | None:
    """`token` written again with the newest key, or None when no configured key reads it."""
    if not token:
        return token
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        return None
