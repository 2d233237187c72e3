"""Chapter configs: typed records whose defaults come from a profile, validated before any work starts.

A chapter declares its knobs once, as a frozen dataclass whose field defaults are the ``full`` profile,
and lists what the other profiles change::

    @dataclass(frozen=True)
    class Config(BaseConfig):
        slug: ClassVar[str] = "rose_sosmd"
        PROFILES: ClassVar[dict] = {"full": {}, "smoke": {"n_seeds": 1}}
        n_seeds: int = knob(5, ge=1, doc="seeds averaged in every curve")
        beta: float = knob(0.1, gt=0, doc="KL regularisation strength β")

    cfg = Config.from_profile("smoke", seed=3, beta=None)  # None means "the profile's value"

Papermill type-checks nothing (a string for an int runs, an unknown name only warns), so every value
is checked here: unknown profile, unknown name, wrong type (``True`` is not an int, ``"3"`` is not a
number), out of range, not one of the allowed choices. Each failure raises :class:`ConfigError` with
one line naming the parameter and what is allowed.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, ClassVar, Literal

__all__ = ["BaseConfig", "ConfigError", "knob"]


class ConfigError(ValueError):
    """A parameter was rejected; the message names it and says what is allowed."""


def knob(
    default: Any,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple | None = None,
    min_len: int | None = None,
    doc: str = "",
) -> Any:
    """A config field with its allowed range; bounds apply to a number or to every item of a list."""
    meta = dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices, min_len=min_len, doc=doc)
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        inner = typing.get_args(tp)[0]
        plural = {int: "integers", float: "numbers", str: "strings", bool: "true/false values"}
        return f"a list of {plural.get(inner, _type_name(inner))}"
    return {int: "an integer", float: "a number", str: "a string", bool: "true/false"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _coerce(value: Any, tp: Any) -> Any:
    """Return ``value`` as type ``tp`` or raise TypeError; never guesses (no "3" -> 3, no True -> 1)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value in typing.get_args(tp) and type(value) in {type(a) for a in typing.get_args(tp)}:
            return value
        raise TypeError
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(tp):
            if option is type(None) and value is None:
                return None
            try:
                return _coerce(value, option)
            except TypeError:
                continue
        raise TypeError
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise TypeError
        (inner, *_rest) = typing.get_args(tp)
        return tuple(_coerce(v, inner) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise TypeError
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer() and not isinstance(value, bool):
            return int(value)
        raise TypeError
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and math.isnan(value):
                raise TypeError
            return float(value)
        raise TypeError
    if tp is str:
        if isinstance(value, str):
            return value
        raise TypeError
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise TypeError


def _range_text(meta: dict) -> str:
    parts = []
    for key, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if meta.get(key) is not None:
            parts.append(f"{sym} {meta[key]}")
    return " and ".join(parts)


def _check_range(name: str, value: Any, meta: dict, prefix: str) -> None:
    items = value if isinstance(value, tuple) else (value,)
    if isinstance(value, tuple) and meta.get("min_len") is not None and len(value) < meta["min_len"]:
        raise ConfigError(f"{prefix}parameter '{name}' needs at least {meta['min_len']} items; got {list(value)}")
    for item in items:
        if meta.get("choices") is not None and item not in meta["choices"]:
            allowed = ", ".join(repr(c) for c in meta["choices"])
            raise ConfigError(f"{prefix}parameter '{name}' must be one of {allowed}; got {item!r}")
        if not isinstance(item, (int, float)) or isinstance(item, bool):
            continue
        bad = (
            (meta.get("ge") is not None and not item >= meta["ge"])
            or (meta.get("gt") is not None and not item > meta["gt"])
            or (meta.get("le") is not None and not item <= meta["le"])
            or (meta.get("lt") is not None and not item < meta["lt"])
        )
        if bad:
            shown = list(value) if isinstance(value, tuple) else value
            raise ConfigError(f"{prefix}parameter '{name}' must be {_range_text(meta)}; got {shown!r}")


@dataclasses.dataclass(frozen=True)
class BaseConfig:
    """Base of every chapter's ``Config``: ``profile`` and ``seed`` plus the chapter's own knobs.

    Subclasses set the class variables ``slug`` and ``PROFILES`` (profile name -> the fields it changes
    from the defaults, which are the ``full`` profile), and may override :meth:`check` for rules that
    involve several fields.
    """

    slug: ClassVar[str] = ""
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"full": {}, "smoke": {}}

    profile: str = "full"
    seed: int = knob(0, ge=0, doc="master seed; every random draw in the chapter derives from it")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_profile(cls, profile: str = "full", seed: Any = 0, **overrides: Any) -> "BaseConfig":
        """Defaults of ``profile``, then ``seed`` and every override that is not ``None``, all validated."""
        prefix = f"{cls.slug}: " if cls.slug else ""
        if not isinstance(profile, str) or profile not in cls.PROFILES:
            allowed = ", ".join(repr(p) for p in cls.PROFILES)
            raise ConfigError(f"{prefix}parameter 'profile' must be one of {allowed}; got {profile!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ConfigError(
                f"{prefix}unknown parameter {', '.join(repr(u) for u in unknown)}; "
                f"known parameters are {', '.join(sorted(names))}"
            )
        values = dict(cls.PROFILES[profile])
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["profile"] = profile
        values["seed"] = 0 if seed is None else seed
        return cls(**values)

    def __post_init__(self) -> None:
        prefix = f"{self.slug}: " if self.slug else ""
        if not isinstance(self.profile, str) or self.profile not in self.PROFILES:
            allowed = ", ".join(repr(p) for p in self.PROFILES)
            raise ConfigError(f"{prefix}parameter 'profile' must be one of {allowed}; got {self.profile!r}")
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            try:
                coerced = _coerce(value, hints[f.name])
            except TypeError:
                raise ConfigError(
                    f"{prefix}parameter '{f.name}' must be {_type_name(hints[f.name])}; got {value!r}"
                ) from None
            _check_range(f.name, coerced, dict(f.metadata), prefix)
            object.__setattr__(self, f.name, coerced)
        self.check()

    def check(self) -> None:
        """Cross-field rules; raise :meth:`fail` on a violation. The base has none."""

    def fail(self, name: str, message: str) -> None:
        """Raise the one-line :class:`ConfigError` for parameter ``name``."""
        prefix = f"{self.slug}: " if self.slug else ""
        raise ConfigError(f"{prefix}parameter '{name}' {message}")

    # ------------------------------------------------------------------ views
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    def replace(self, **changes: Any) -> "BaseConfig":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def describe(cls) -> "list[dict[str, Any]]":
        """One row per knob: name, type, full default, smoke value, allowed range and doc."""
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            row = {"name": f.name, "type": _type_name(hints[f.name]), "doc": f.metadata.get("doc", "")}
            for prof in cls.PROFILES:
                row[prof] = prof if f.name == "profile" else cls.PROFILES[prof].get(f.name, f.default)
            row["allowed"] = _range_text(dict(f.metadata)) or (
                ", ".join(map(repr, f.metadata["choices"])) if f.metadata.get("choices") else ""
            )
            rows.append(row)
        return rows
