"""The C fast path of the codec (issue 34): msgspec Structs derived from the pydantic catalogue.

The pydantic models in protocol/messages.py stay the single source of truth. At import time this
module walks each model and builds the equivalent `msgspec.Struct` (same field names, types,
defaults); msgspec then decodes msgpack and validates the schema in one pass, in C. A type whose
model cannot be mirrored exactly is simply left to pydantic, so a new catalogue type always works
and gets the fast path when its fields are plain:

* mirrored: str, int, float, bool, None, Optional[X], Literal[...], list[X], dict[str, X] and
  nested catalogue models, with plain defaults or `default_factory` of list/dict/a nested model;
* left to pydantic: validators (e.g. FinalResult's), aliases, field constraints, private
  attributes, unions other than Optional, and `Any` anywhere in the schema (msgpack maps inside an
  `Any` value may carry non-string keys, which the codec must reject as `msgpack`; msgspec would
  accept them).

msgspec is strict where pydantic's lax mode coerces (an int field given 3.0, a bool given 1, a str
given bytes): what msgspec refuses goes on to pydantic, which accepts or rejects it exactly as
before, so the fast path never accepts less than pydantic did, nor anything pydantic would refuse.

Handlers still receive the pydantic model: `to_model` builds it from the validated Struct without
validating again (what `model_construct` does, minus its per-field Python loop).
"""
from __future__ import annotations

import functools
import types
import typing
from typing import Any, Callable, Literal, Optional, Union

import msgspec
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from . import accel
from .messages import MESSAGE_TYPES, Body

_SCALARS = (str, int, float, bool, type(None))
_setattr = object.__setattr__


class Unsupported(Exception):
    """The model has something msgspec cannot mirror exactly: pydantic handles that type."""


class _Mirror:
    """A model's Struct and the converter from a decoded Struct back to the pydantic model."""

    __slots__ = ("model", "struct", "convert", "names", "flat")

    def __init__(self, model, struct, convert, names, flat):
        self.model, self.struct, self.convert, self.names = model, struct, convert, names
        self.flat = flat       # no nested model: the instance's __dict__ is its model_dump()


_mirrors: dict[type, _Mirror | None] = {}


def _convert_type(ann: Any) -> tuple[Any, Callable[[Any], Any] | None]:
    """(msgspec type, converter of a decoded value back to the pydantic value or None)."""
    if ann in _SCALARS:
        return ann, None
    if ann is Any or ann is object:
        raise Unsupported("Any")
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        mirror = mirror_of(ann)
        if mirror is None:
            raise Unsupported(f"nested {ann.__name__}")
        return mirror.struct, mirror.convert
    if origin is Literal:
        if not all(type(a) in (str, int) for a in args):
            raise Unsupported("literal of other kinds")
        return ann, None
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1 or len(args) != 2:
            raise Unsupported("union")
        inner, conv = _convert_type(rest[0])
        if conv is None:
            return Optional[inner], None
        return Optional[inner], (lambda v, c=conv: None if v is None else c(v))
    if origin is list:
        (item,) = args or (Any,)
        inner, conv = _convert_type(item)
        if conv is None:
            return list[inner], None
        return list[inner], (lambda v, c=conv: [c(x) for x in v])
    if origin is dict:
        key, value = args or (Any, Any)
        if key is not str:
            raise Unsupported("dict key")
        inner, conv = _convert_type(value)
        if conv is None:
            return dict[str, inner], None
        return dict[str, inner], (lambda v, c=conv: {k: c(x) for k, x in v.items()})
    raise Unsupported(repr(ann))


def mirror_of(model: type) -> _Mirror | None:
    """The model's mirror, built on first use; None when pydantic must handle the type."""
    if model in _mirrors:
        return _mirrors[model]
    _mirrors[model] = None            # a self-referencing model stays with pydantic
    try:
        mirror = _build(model)
    except Unsupported:
        mirror = None
    _mirrors[model] = mirror
    return mirror


def _build(model: type) -> _Mirror:
    deco = model.__pydantic_decorators__
    if (deco.validators or deco.field_validators or deco.root_validators
            or deco.model_validators or deco.model_serializers or deco.field_serializers
            or deco.computed_fields):
        raise Unsupported("validators")
    if model.__private_attributes__ or getattr(model, "__pydantic_root_model__", False):
        raise Unsupported("private attributes")
    if model.model_config.get("extra") == "allow":
        raise Unsupported("extra fields kept")
    if model.model_config.get("extra") == "forbid":
        raise Unsupported("extra fields forbidden")
    fields: list[tuple] = []
    nested: list[tuple[str, Callable[[Any], Any]]] = []
    names: list[str] = []
    for name, info in model.model_fields.items():
        if (info.alias and info.alias != name) or info.metadata or info.validation_alias:
            raise Unsupported(f"{name}: alias or constraints")
        ann, conv = _convert_type(info.annotation)
        if conv is not None:
            nested.append((name, conv))
        names.append(name)
        if info.default_factory is not None:
            factory = info.default_factory
            if factory in (list, dict):
                fields.append((name, ann, msgspec.field(default_factory=factory)))
            elif isinstance(factory, type) and issubclass(factory, BaseModel):
                sub = mirror_of(factory)
                if sub is None:
                    raise Unsupported(f"{name}: default factory")
                fields.append((name, ann, msgspec.field(default_factory=sub.struct)))
            else:
                raise Unsupported(f"{name}: default factory")
        elif info.default is PydanticUndefined:
            fields.append((name, ann))
        else:
            default = info.default
            if not isinstance(default, _SCALARS):
                raise Unsupported(f"{name}: default {default!r}")
            fields.append((name, ann, default))
    # msgspec wants required fields first; keyword-only lifts that (the wire is a map anyway)
    struct = msgspec.defstruct(f"{model.__name__}Wire", fields, kw_only=True,
                               forbid_unknown_fields=False)
    return _Mirror(model, struct, _converter(model, names, nested), tuple(names), not nested)


def _converter(model: type, names: list[str], nested: list[tuple[str, Callable]]
               ) -> Callable[[Any], BaseModel]:
    """Struct → pydantic model, no re-validation (the Struct was validated by msgspec)."""
    new = model.__new__
    fieldset = frozenset(names)
    asdict = msgspec.structs.asdict      # shallow, in C: the field values as they are
    if not nested and accel.WIRE is not None:   # the same steps in one C call (_wire.c)
        return functools.partial(accel.WIRE.model, model, asdict, fieldset)

    def convert(s) -> BaseModel:
        d = asdict(s)
        for n, conv in nested:
            d[n] = conv(d[n])
        obj = new(model)
        _setattr(obj, "__dict__", d)
        _setattr(obj, "__pydantic_fields_set__", set(fieldset))
        _setattr(obj, "__pydantic_extra__", None)
        _setattr(obj, "__pydantic_private__", None)
        return obj
    return convert


class BodyCodec:
    """Per catalogue type: a msgspec decoder of the body, and the converter to the model."""

    __slots__ = ("decoder", "convert")

    def __init__(self, mirror: _Mirror):
        self.decoder = msgspec.msgpack.Decoder(mirror.struct)
        self.convert = mirror.convert


def body_codecs() -> dict[str, BodyCodec]:
    """Every catalogue type that has a fast path (derived from MESSAGE_TYPES, never listed)."""
    out = {}
    for name, model in MESSAGE_TYPES.items():
        mirror = mirror_of(model)
        if mirror is not None:
            out[name] = BodyCodec(mirror)
    return out


def flat_types() -> frozenset[str]:
    """Catalogue types whose validated instance's `__dict__` is already the plain body (only
    mirrored scalars, lists and maps of them): a sender copies it instead of serializing."""
    return frozenset(n for n, m in MESSAGE_TYPES.items()
                     if (mirror := mirror_of(m)) is not None and mirror.flat)


def fast_types() -> tuple[list[str], list[str]]:
    """(types with the msgspec fast path, types left to pydantic): for docs and tests."""
    fast = sorted(n for n, m in MESSAGE_TYPES.items() if mirror_of(m) is not None)
    return fast, sorted(set(MESSAGE_TYPES) - set(fast))


class WireEnvelope(msgspec.Struct, kw_only=True):
    """The envelope's header as msgspec checks it; `body` is left as raw bytes (a zero-copy
    slice of the payload) for the type's own decoder. Checks the decoder in envelope.py keeps
    for itself: v == 1, seq >= 0, the type in the catalogue."""
    v: int
    id: str
    ts: float
    type: str
    from_: str = msgspec.field(name="from")
    node: str
    seq: int
    task: str
    to: Optional[str] = None
    corr: Optional[str] = None
    reply_to: Optional[str] = None
    trace: Optional[str] = None
    body: msgspec.Raw


__all__ = ["BodyCodec", "WireEnvelope", "body_codecs", "fast_types", "mirror_of", "Body"]
