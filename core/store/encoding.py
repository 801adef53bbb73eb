"""Text for Redis: a model's JSON whatever text its sandbox put in it, and replies as `str`."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

M = TypeVar("M", bound=BaseModel)
_SURROGATES = re.compile("[\ud800-\udfff]")


def storable(model: M) -> tuple[M, str]:
    """A result, step or observation that can be stored, and its JSON, whatever text its
    sandbox put in it. A lone surrogate (a file name's byte that is not UTF-8, an escape the
    code under test wrote in its completion record) has no UTF-8: it becomes U+FFFD instead
    of failing the episode."""
    try:
        return model, model.model_dump_json()
    except PydanticSerializationError:
        clean = type(model).model_validate(without_surrogates(model.model_dump(mode="json")))
        return clean, clean.model_dump_json()


def dump_json(model: BaseModel) -> str:
    return storable(model)[1]


def without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else value
