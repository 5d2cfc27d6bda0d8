"""Optional model signatures: an HMAC whose key is kept outside the model folder.

The manifest's SHA-256 sits beside the file it covers, so whoever can write one can rewrite
the other: it shows a model is whole, not who made it. The restricted unpickler keeps a
planted model from running code; it cannot keep one from predicting wrongly (a booster of the
planter's choosing, feature SQL of their choosing run in the read-only sandbox). With
``AUTOFE_MODEL_KEY`` set, :func:`~autofe.modeling.artifact.save_model` writes ``signature``,
an HMAC-SHA256 of the format and SHA-256 under that key, into the manifest, and
:func:`~autofe.modeling.artifact.load_model` refuses a model whose signature is missing or
differs before unpickling it. Unset, nothing is signed or checked, so copying a model folder
to another machine works as before; set the same key wherever models are trained and served.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autofe.errors import ModelError

KEY_ENV = "AUTOFE_MODEL_KEY"


def model_key() -> bytes | None:
    """The signing key from ``AUTOFE_MODEL_KEY`` (None when unset or empty)."""
    key = os.environ.get(KEY_ENV, "")
    return key.encode() if key else None


def signature(key: bytes, sha256: str, model_format: int) -> str:
    """The HMAC-SHA256 (hex) of a model file's format and SHA-256 under ``key``.

    >>> signature(b"key", "ab", 3) == signature(b"key", "ab", 3) != signature(b"other", "ab", 3)
    True
    """
    message = f"autofe-model/{model_format}/{sha256}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def check_signature(manifest: Mapping[str, Any], key: bytes | None, where: Path) -> None:
    """Nothing without a key; with one, the manifest must carry the signature it gives.

    Raises:
        ModelError: the model is unsigned, or signed with another key, or its file or
            manifest was changed after signing.
    """
    if key is None:
        return
    signed = manifest.get("signature")
    if not isinstance(signed, str):
        raise ModelError(
            f"{where}: not signed, and {KEY_ENV} is set, so only models signed with that key "
            "are loaded; retrain it with the key set"
        )
    expected = signature(key, str(manifest.get("sha256")), int(manifest.get("format", 1)))
    if not hmac.compare_digest(signed, expected):
        raise ModelError(
            f"{where}: its signature does not match {KEY_ENV} (signed with another key, or "
            "changed since it was signed); refusing to load it"
        )
