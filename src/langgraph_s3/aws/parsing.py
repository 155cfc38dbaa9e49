"""botocore's XML response parser with its per-element walk planned once per shape.

A listing of 1,000 keys is 1,000 ``Contents`` structures: botocore's parser builds a
tag dictionary for each (a regular expression per child element to strip the XML
namespace), works out each member's XML name, and dispatches each value by name
through two decorators, about 0.1 ms a key: most of a large listing's CPU, and most of
a store search's. :class:`PlannedXMLParser` does the same per structure from a plan
made once per shape (members, their XML names, how each scalar converts), with the
conversions botocore's own handlers make (empty text is ``""``, booleans are
``text == "true"``, timestamps through :func:`parse_timestamp`). Anything a
plan does not cover (an error shape, a tagged union, an XML attribute member, a map or
a blob member, a scalar repeated where one was expected) goes through botocore's code
unchanged. Only the sessions the library makes itself use it (``ClientFactory``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from aiobotocore.parsers import AioResponseParserFactory, AioRestXMLParser

__all__ = ["PlannedParserFactory", "PlannedXMLParser", "parse_timestamp"]

_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)$")
"""S3's timestamps (``2026-12-05T21:34:15.000Z``): calendar dates with a UTC offset."""


def parse_timestamp(value: Any) -> datetime:
    """botocore's timestamp parser for the sessions the library makes itself: S3's ISO
    8601 text (every ``LastModified`` of a listing) by ``datetime.fromisoformat``,
    anything else (an HTTP date, epoch seconds) by botocore's own. Its parser (dateutil)
    cost about 0.5 ms a key: most of a 3,000-key listing's CPU. The same aware datetime
    either way."""
    if isinstance(value, str) and _ISO.match(value):
        try:
            return datetime.fromisoformat(value)
        except ValueError:  # a date out of range: botocore's error
            pass
    from botocore.utils import parse_timestamp as botocore_parse

    out: datetime = botocore_parse(value)
    return out


_INT = frozenset({"integer", "long"})
_SCALAR = frozenset({"string", "character", "boolean", "timestamp", "integer", "long"})
_NESTED = frozenset({"structure", "list"})
_Plan = tuple[tuple[str, str, Any, str], ...]
"""Per member: its XML name, its name, its shape, its type."""


class PlannedXMLParser(AioRestXMLParser):  # type: ignore[misc]
    """S3's ``rest-xml`` parser, structures parsed from a plan per shape."""

    def __init__(
        self, *args: Any, plans: dict[int, tuple[Any, _Plan | None]] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._plans = plans if plans is not None else {}
        """Plans by shape, shared by the parsers of one factory (one is made per answer)."""

    def _plan(self, shape: Any) -> _Plan | None:
        """The shape's plan, or None when botocore's walk must parse it."""
        held = self._plans.get(id(shape))
        if held is not None and held[0] is shape:
            return held[1]
        plan: _Plan | None = None
        if not shape.metadata.get("exception", False) and not getattr(
            shape, "is_tagged_union", False
        ):
            out: list[tuple[str, str, Any, str]] = []
            for name, member in shape.members.items():
                where = member.serialization
                if where.get("location") in self.KNOWN_LOCATIONS or where.get("eventheader"):
                    continue  # headers and the like: parsed apart, as botocore does
                kind = member.type_name
                if where.get("xmlAttribute") or kind not in _SCALAR | _NESTED:
                    break
                out.append((self._member_key_name(member, name), name, member, kind))
            else:
                plan = tuple(out)
        self._plans[id(shape)] = (shape, plan)  # the shape is kept: its id stays its own
        return plan

    def _handle_structure(self, shape: Any, node: Any) -> Any:
        plan = self._plan(shape)
        if plan is None:
            return super()._handle_structure(shape, node)
        if isinstance(node, list):  # as botocore: a repeated structure's first
            node = node[0]
        by_tag: dict[str, Any] = {}
        for item in node:
            tag = item.tag
            if "}" in tag:
                tag = tag[tag.rindex("}") + 1 :] if tag.startswith("{") else self._node_tag(item)
            seen = by_tag.get(tag)
            if seen is None:
                by_tag[tag] = item
            elif isinstance(seen, list):
                seen.append(item)
            else:
                by_tag[tag] = [seen, item]
        parsed: dict[str, Any] = {}
        for xml_name, name, member, kind in plan:
            found = by_tag.get(xml_name)
            if found is None:
                continue
            if kind in _NESTED or isinstance(found, list):
                parsed[name] = self._parse_shape(member, found)
                continue
            text = found.text
            if text is None:
                text = ""
            if kind == "string" or kind == "character":
                parsed[name] = text
            elif kind in _INT:
                parsed[name] = int(text)
            elif kind == "boolean":
                parsed[name] = text == "true"
            else:  # timestamp
                parsed[name] = self._timestamp_parser(text)
        return parsed


class PlannedParserFactory(AioResponseParserFactory):  # type: ignore[misc]
    """aiobotocore's parser factory, with :class:`PlannedXMLParser` for ``rest-xml`` (its
    plans kept across answers) and :func:`parse_timestamp` for every protocol."""

    def __init__(self) -> None:
        super().__init__()
        self.set_parser_defaults(timestamp_parser=parse_timestamp)
        self._plans: dict[int, tuple[Any, _Plan | None]] = {}

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "rest-xml":
            return PlannedXMLParser(plans=self._plans, **self._defaults)
        return super().create_parser(protocol_name)
