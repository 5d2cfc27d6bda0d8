"""The allow-list unpickler: a real model loads, and nothing a hostile pickle names runs."""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path

import pytest
from planted_models import PAYLOADS, call, payloads

from autofe.errors import ModelError
from autofe.modeling.artifact import MODEL_FILE
from autofe.modeling.dataset import Encoder
from autofe.modeling.safe_unpickle import ARGUMENTS, CLASSES, REDUCERS, safe_unpickle


def _recorded_globals(data: bytes) -> set[tuple[str, str]]:
    names: set[tuple[str, str]] = set()

    class Recording(pickle._Unpickler):
        def find_class(self, module: str, name: str) -> object:
            names.add((module, name))
            return super().find_class(module, name)

    Recording(io.BytesIO(data)).load()
    return names


def test_a_real_model_references_only_the_allow_list_and_needs_every_class(
    manual_model: Path,
) -> None:
    """The lists are exactly what a model trained on the example workspace is made of."""
    names = _recorded_globals((manual_model / MODEL_FILE).read_bytes())
    assert names <= CLASSES | REDUCERS | ARGUMENTS
    assert names >= CLASSES


@pytest.mark.parametrize("kind", PAYLOADS)
def test_a_payload_is_refused_by_name_and_never_runs(tmp_path: Path, kind: str) -> None:
    sentinel = tmp_path / "SENTINEL"
    data, refusal = payloads(sentinel, tmp_path)[kind]
    with pytest.raises(ModelError, match=rf"^model\.joblib: {refusal}, which an autofe model"):
        safe_unpickle(data, "model.joblib")
    assert not sentinel.exists()


def _unicode(text: str) -> bytes:
    return b"X" + struct.pack("<I", len(text.encode())) + text.encode()


ARTIFACT = b"\x80\x04cautofe.modeling.artifact\nArtifact\n)\x81"
"""An empty Artifact made the way pickle makes one (NEWOBJ, no arguments)."""


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        (
            call("lightgbm.basic", "Booster", None, None, "/etc/hostname"),
            r"calls lightgbm\.basic\.Booster while loading",
        ),
        (
            b"\x80\x04ccollections\ndefaultdict\nclightgbm.basic\nBooster\n\x85R.",
            r"makes a defaultdict calling lightgbm\.basic\.Booster",
        ),
        (
            b"\x80\x04clightgbm.basic\nBooster\nN\x85\x81.",
            r"creates lightgbm\.basic\.Booster with arguments",
        ),
        (b"\x80\x04cdatetime\ndatetime\n)\x81.", r"creates datetime\.datetime"),
        (
            ARTIFACT
            + b"N}"
            + _unicode("__setstate__")
            + b"cnumpy\ndtype\ns\x86b"
            + _unicode("f8")
            + b"b.",
            r"sets __setstate__ on an instance of autofe\.modeling\.artifact\.Artifact",
        ),
        (b"\x80\x02(cnumpy\ndtype\nios\nsystem\n.", r"uses the pickle instruction INST"),
        (b"\x80\x02" + _unicode("x") + b"Q.", r"uses the pickle instruction BINPERSID"),
        (b"\x80\x02\x82\x01.", r"uses the pickle instruction EXT1"),
    ],
    ids=[
        "call a class",
        "defaultdict factory",
        "NEWOBJ args",
        "NEWOBJ reducer",
        "setstate",
        "INST",
        "BINPERSID",
        "EXT1",
    ],
)
def test_allowed_names_used_otherwise_are_refused(data: bytes, refusal: str) -> None:
    with pytest.raises(ModelError, match=rf"^model\.joblib: {refusal}, which an autofe model"):
        safe_unpickle(data, "model.joblib")


def test_a_class_cannot_be_patched_through_its_state() -> None:
    """BUILD on a class would set the attribute for the whole process (every later model)."""
    encode = Encoder.encode
    state = pickle.dumps((None, {"encode": "patched"}), protocol=2)[2:-1]
    data = b"\x80\x04cautofe.modeling.dataset\nEncoder\n" + state + b"b."
    try:
        with pytest.raises(
            ModelError, match=r"sets the state of autofe\.modeling\.dataset\.Encoder"
        ):
            safe_unpickle(data, "model.joblib")
        assert Encoder.encode is encode
    finally:
        Encoder.encode = encode  # type: ignore[method-assign]  # had the old loader run


@pytest.mark.parametrize("data", [b"not a pickle", b"", b"\x80\x05\x95"])
def test_a_file_that_is_no_pickle_is_one_clear_error(data: bytes) -> None:
    with pytest.raises(ModelError, match=r"^m\.joblib: not a readable autofe model \("):
        safe_unpickle(data, "m.joblib")
