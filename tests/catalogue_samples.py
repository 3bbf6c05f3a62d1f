"""A valid, fully populated sample of every catalogue message type, built from the models themselves.

Every field gets a non-default value of its annotated type (nested models, lists, dicts, Literals,
Optionals), so a round trip that compares dumps proves each field survives encoding and validation.
Built from the annotations so a new type or field is covered without editing this file.
"""
from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel

from protocol.messages import MESSAGE_TYPES, Body


def _value(annotation: Any, name: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return {"nested": [1, 2.5, "three", None, True], "name": name}
    if origin is Literal:
        return args[-1]  # the last choice: rarely the default
    if origin in (Union, types.UnionType):
        concrete = [a for a in args if a is not type(None)]
        return _value(concrete[0], name)
    if origin is list:
        return [_value(args[0], name)]
    if origin is dict:
        return {f"{name}-key": _value(args[1], name)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return build(annotation).model_dump()
    if annotation is str:
        return f"{name}-value"
    if annotation is bool:
        return True
    if annotation is int:
        return 7
    if annotation is float:
        return 2.5
    raise TypeError(f"no sample for {name}: {annotation!r}")


def build(model: type[BaseModel]) -> BaseModel:
    """A validated instance of `model` with every field set."""
    hints = typing.get_type_hints(model)
    data = {name: _value(hints[name], name) for name in model.model_fields}
    return model.model_validate(data)


def all_samples() -> dict[str, Body]:
    """type name -> a sample message of that type, for every type of the catalogue."""
    return {name: build(model) for name, model in MESSAGE_TYPES.items()}
