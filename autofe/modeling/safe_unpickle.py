"""Unpickle a model artifact without running code: only what an autofe model is made of.

Unpickling calls whatever the file names. A ``model.joblib`` planted with a manifest
recomputed to match would run ``os.system`` the moment ``autofe predict``, the server or the
nightly job loaded it; the SHA-256 beside it catches corruption, not tampering. This loader
admits only the globals a saved autofe model references (recorded from a model trained on the
example workspace; a test keeps the lists exactly that), and uses each only the way such a
model does:

- a class of :data:`CLASSES` is only created empty (``NEWOBJ``, as ``copyreg`` pickles an
  instance) and then given its state (``BUILD``); it is never called, so a pickle cannot run
  ``Booster(model_file=...)`` or any other constructor with arguments of its choosing;
- only :data:`REDUCERS` are called (``REDUCE``): numpy's array, dtype and scalar rebuilders,
  ``datetime``, ``OrderedDict`` and ``defaultdict`` (whose factory must be one of them, as
  it is called later);
- state goes to instances of those classes (and numpy's arrays and dtypes) only: ``BUILD``
  on a class would set that class's attributes for the whole process (``Encoder.encode =
  ...``), and an instance given its own ``__setstate__`` would have it called by the next
  ``BUILD``;
- the opcodes that import or call some other way (``INST``, ``OBJ``, the ``EXT`` codes,
  persistent ids) are refused: autofe never writes them.

Names are matched exactly, never by module prefix: ``autofe.modeling.artifact`` is allowed
for ``Artifact`` only, not for ``os.system`` reached through its ``os`` import. The
pure-Python unpickler is used because the C one has no hook on ``REDUCE`` or ``BUILD``; the
joblib loader it replaces was pure Python too, and LightGBM parsing the boosters' model text
dominates either way (the example model: 44 ms to load, as before).
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import IO, Any, ClassVar

import numpy as np

from autofe.errors import ModelError

Name = tuple[str, str]

CLASSES: frozenset[Name] = frozenset(
    {
        ("autofe.modeling.artifact", "Artifact"),
        ("autofe.modeling.train", "RuntimeModel"),
        ("autofe.modeling.conformal", "Calibration"),
        ("autofe.modeling.dataset", "Encoder"),
        ("autofe.modeling.metrics", "Metrics"),
        ("autofe.featurespec", "FeatureSpec"),
        ("autofe.featurespec", "Provenance"),
        # A Booster pickles as its model text, which its __setstate__ parses; the regressor is
        # the scikit-learn wrapper the final model is fit with (parameters and its Booster).
        ("lightgbm.basic", "Booster"),
        ("lightgbm.sklearn", "LGBMRegressor"),
    }
)
"""Created empty and given their state; never called."""

_NUMPY = (("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer"))
"""numpy's own rebuilders: numpy 2 pickles them under ``numpy._core``, numpy 1 ``numpy.core``."""

REDUCERS: frozenset[Name] = frozenset(
    {
        ("numpy", "dtype"),
        ("datetime", "datetime"),
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        *(
            (f"numpy.{core}.{module}", name)
            for core in ("core", "_core")
            for module, name in _NUMPY
        ),
    }
)
"""Called with the pickle's arguments: each is harmless with any arguments a pickle can build."""

ARGUMENTS: frozenset[Name] = frozenset({("numpy", "ndarray")})
"""Only passed to a reducer (the array type ``_reconstruct`` makes), never called or built."""

_REFUSED_OPCODES = {
    pickle.INST: "INST",
    pickle.OBJ: "OBJ",
    pickle.EXT1: "EXT1",
    pickle.EXT2: "EXT2",
    pickle.EXT4: "EXT4",
    pickle.PERSID: "PERSID",
    pickle.BINPERSID: "BINPERSID",
}


def safe_unpickle(data: bytes, where: str) -> object:
    """The object pickled in ``data`` (the file ``where``), built from :data:`CLASSES`,
    :data:`REDUCERS` and :data:`ARGUMENTS` only.

    Raises:
        ModelError: the pickle names or does something an autofe model does not (the message
            says what), or it cannot be read at all.
    """
    try:
        return _Restricted(io.BytesIO(data), where).load()
    except ModelError:
        raise
    except Exception as exc:  # a hostile or broken pickle can raise anything while it loads
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ModelError(f"{where}: not a readable autofe model ({reason})") from exc


def resolve(name: Name) -> Any:
    """The object an allowed name stands for; numpy's rebuilders from the installed numpy
    whichever spelling the pickle used.

    >>> old, new = ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer")
    >>> resolve(old) is resolve(new)
    True
    """
    module, attribute = name
    if module.startswith(("numpy.core.", "numpy._core.")):
        core = "numpy._core" if int(np.__version__.split(".")[0]) >= 2 else "numpy.core"
        module = f"{core}.{module.rsplit('.', 1)[1]}"
    return getattr(importlib.import_module(module), attribute)


def _named(obj: object) -> str:
    """How a refusal names ``obj``: a class's or function's qualified name, else its type."""
    if isinstance(obj, type) or callable(obj):
        module = getattr(obj, "__module__", None) or "builtins"
        return f"{module}.{getattr(obj, '__qualname__', repr(obj))}"
    return f"a {type(obj).__qualname__}"


_ORIGINAL: dict[int, Callable[[Any], None]] = dict(pickle._Unpickler.dispatch)


class _Restricted(pickle._Unpickler):
    """The pure-Python unpickler with every opcode that imports, calls or sets state checked."""

    stack: list[Any]
    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(_ORIGINAL)

    def __init__(self, handle: IO[bytes], where: str) -> None:
        super().__init__(handle)
        self._where = where
        self._classes: list[object] = []
        self._reducers: list[object] = []

    def _refuse(self, what: str) -> ModelError:
        return ModelError(
            f"{self._where}: {what}, which an autofe model never does; refusing to load it"
        )

    def find_class(self, module: str, name: str) -> Any:
        sys.audit("pickle.find_class", module, name)
        key = (module, name)
        if key not in CLASSES | REDUCERS | ARGUMENTS:
            raise ModelError(
                f"{self._where}: references {module}.{name}, which an autofe model never "
                "contains; refusing to load it"
            )
        obj = resolve(key)
        if key in CLASSES:
            self._classes.append(obj)
        elif key in REDUCERS:
            self._reducers.append(obj)
        return obj

    def _is(self, obj: object, kind: list[object]) -> bool:
        return any(obj is known for known in kind)

    def _reduce(self) -> None:
        func, args = self.stack[-2], self.stack[-1]
        if not self._is(func, self._reducers):
            raise self._refuse(f"calls {_named(func)} while loading")
        factory = args[0] if func is defaultdict and args else None
        if factory is not None and not self._is(factory, self._reducers):
            raise self._refuse(f"makes a defaultdict calling {_named(factory)}")
        _ORIGINAL[pickle.REDUCE[0]](self)

    def _newobj(self) -> None:
        cls, args = self.stack[-2], self.stack[-1]
        if not self._is(cls, self._classes) or args:
            raise self._refuse(f"creates {_named(cls)}{' with arguments' if args else ''}")
        _ORIGINAL[pickle.NEWOBJ[0]](self)

    def _newobj_ex(self) -> None:
        cls, args, kwargs = self.stack[-3:]
        if not self._is(cls, self._classes) or args or kwargs:
            raise self._refuse(
                f"creates {_named(cls)}{' with arguments' if args or kwargs else ''}"
            )
        _ORIGINAL[pickle.NEWOBJ_EX[0]](self)

    def _build(self) -> None:
        target = self.stack[-2]
        built = (*(c for c in self._classes if isinstance(c, type)), np.ndarray, np.dtype)
        if isinstance(target, type) or not isinstance(target, built):
            raise self._refuse(f"sets the state of {_named(target)}")
        if "__setstate__" in getattr(target, "__dict__", {}):  # planted by an earlier BUILD
            raise self._refuse(f"sets __setstate__ on an instance of {_named(type(target))}")
        _ORIGINAL[pickle.BUILD[0]](self)


def _refused(name: str) -> Callable[[_Restricted], None]:
    def refuse(self: _Restricted) -> None:
        raise self._refuse(f"uses the pickle instruction {name}")

    return refuse


_Restricted.dispatch.update(
    {
        pickle.REDUCE[0]: _Restricted._reduce,
        pickle.NEWOBJ[0]: _Restricted._newobj,
        pickle.NEWOBJ_EX[0]: _Restricted._newobj_ex,
        pickle.BUILD[0]: _Restricted._build,
        **{opcode[0]: _refused(name) for opcode, name in _REFUSED_OPCODES.items()},
    }
)
