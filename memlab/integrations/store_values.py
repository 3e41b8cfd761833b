"""How ``MemlabStore`` writes a LangGraph value into a memory turn's text and reads it back.

The text is the value as JSON, so the backend indexes and retrieves what the value says. Leaves
JSON cannot hold (``datetime``, ``UUID``, ``Decimal``, sets, pydantic models ...) are kept
as ``{"$langgraph": [type, base64], "text": str(leaf)}``: LangGraph's own serializer
(``JsonPlusSerializer``) writes and revives them, and ``text`` stays readable for retrieval. The
turn's metadata flags such values (``typed``), so a plain value that happens to look like a tag
is never revived. Tuples are stored as lists, as LangGraph's serializer reads them back.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

_TAG = "$langgraph"
_SERDE = JsonPlusSerializer()


def _encode(value: Any) -> tuple[Any, bool]:
    if value is None or isinstance(value, str | bool | int):
        return value, False
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return value, False
    if type(value) is dict and all(isinstance(k, str) for k in value):
        pairs = {k: _encode(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(typed for _, typed in pairs.values())
    if type(value) in (list, tuple):  # LangGraph's serializer reads tuples back as lists too
        items = [_encode(v) for v in value]
        return [v for v, _ in items], any(typed for _, typed in items)
    kind, data = _SERDE.dumps_typed(value)
    return {_TAG: [kind, base64.b64encode(data).decode()], "text": str(value)}, True


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        tag = value.get(_TAG)
        if isinstance(tag, list) and len(tag) == 2 and set(value) == {_TAG, "text"}:
            return _SERDE.loads_typed((tag[0], base64.b64decode(tag[1])))
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def value_to_text(value: dict[str, Any]) -> tuple[str, bool]:
    """(the turn text, whether it holds typed leaves) for a LangGraph value."""
    encoded, typed = _encode(dict(value))
    return json.dumps(encoded, ensure_ascii=False), typed


def text_to_value(text: str, typed: bool) -> dict[str, Any] | None:
    """The value a turn text holds; None when the text is not a JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return _decode(value) if typed else value
