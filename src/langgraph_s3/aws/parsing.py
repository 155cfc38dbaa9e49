"""botocore's response parsers with their per-member walk planned once per shape:
S3's XML (listings) and DynamoDB's JSON (items).

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
unchanged. :class:`PlannedJSONParser` does the same for DynamoDB's JSON: an item of
held copies is a map of maps of typed values, and botocore looks up every member's
JSON name and dispatches every value by its type's name, about 0.1 ms an answer of a
put's commit; the plan copies scalars, decodes blobs as botocore's blob parser does,
and leaves tagged unions, documents and error shapes to botocore. Only the sessions
the library makes itself use them (``ClientFactory``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from aiobotocore.parsers import AioJSONParser, AioResponseParserFactory, AioRestXMLParser

__all__ = ["PlannedJSONParser", "PlannedParserFactory", "PlannedXMLParser", "parse_timestamp"]

_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)$")
"""S3's timestamps (``2026-12-05T21:34:15.000Z``): calendar dates with a UTC offset."""


_HTTP_DATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d\d) "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d\d):(\d\d):(\d\d) GMT$"
)
"""An HTTP date as S3 sends one in a header (``Last-Modified: Sun, 06 Dec 2026 06:50:00
GMT``, RFC 9110's IMF-fixdate): always UTC, always this form."""
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}


def _tzutc() -> Any:
    """dateutil's UTC, as botocore's parser gives an HTTP date (a singleton)."""
    from dateutil.tz import tzutc  # type: ignore[import-untyped]

    return tzutc()


def parse_timestamp(value: Any) -> datetime:
    """botocore's timestamp parser for the sessions the library makes itself: S3's ISO
    8601 text (every ``LastModified`` of a listing) by ``datetime.fromisoformat``, an
    HTTP date (every object's ``Last-Modified`` header) by its fixed form, anything else
    (epoch seconds, another form) by botocore's own. Its parser (dateutil) cost about
    0.5 ms a key, most of a 3,000-key listing's CPU, and 0.2 ms an object GET: more
    than the signature. The same aware datetime either way."""
    if isinstance(value, str):
        try:
            if _ISO.match(value):
                return datetime.fromisoformat(value)
            found = _HTTP_DATE.match(value)
            if found is not None:
                day, month, year, hour, minute, second = found.groups()
                return datetime(
                    int(year),
                    _MONTHS[month],
                    int(day),
                    int(hour),
                    int(minute),
                    int(second),
                    tzinfo=_tzutc(),
                )
        except ValueError:  # a date out of range: botocore's error
            pass
    from botocore.utils import parse_timestamp as botocore_parse

    out: datetime = botocore_parse(value)
    return out


def _shape_key(shape: Any) -> tuple[tuple[int, str], Any]:
    """What a plan is kept by: the shape's name in its service's description, which
    botocore loads once per session (every client of every event loop shares it: a plan
    per client would grow with the loops), and the object whose id the key holds (kept,
    so that its id stays its own). A shape without one (made by hand) is its own key."""
    described = getattr(getattr(shape, "_shape_resolver", None), "_shape_map", None)
    if isinstance(described, dict):
        return (id(described), shape.name), described
    return (id(shape), ""), shape


_INT = frozenset({"integer", "long"})
_SCALAR = frozenset({"string", "character", "boolean", "timestamp", "integer", "long"})
_NESTED = frozenset({"structure", "list"})
_Plan = tuple[tuple[str, str, Any, str], ...]
"""Per member: its XML name, its name, its shape, its type."""
_Bound = tuple[tuple[str, Any, str, str], ...]
"""Per member bound to the status or a header: its name, its shape, its location, its
header's name lower-cased."""


def _lowered(headers: Any) -> dict[str, Any]:
    """``headers`` as a plain dict by lower-cased name. botocore's ``HeadersDict`` keeps
    each name's lower case beside it (a ``_HeaderKey``): read there, not through its
    mapping methods, which make a key object per lookup."""
    inner = getattr(headers, "_dict", None)
    if isinstance(inner, dict) and all(hasattr(k, "_lower") for k in inner):
        return {k._lower: v for k, v in inner.items()}
    return {str(k).lower(): v for k, v in headers.items()}


class PlannedXMLParser(AioRestXMLParser):  # type: ignore[misc]
    """S3's ``rest-xml`` parser, structures parsed from a plan per shape."""

    def __init__(
        self,
        *args: Any,
        plans: dict[tuple[int, str], tuple[Any, _Plan | None]] | None = None,
        bound: dict[tuple[int, str], tuple[Any, _Bound]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._plans = plans if plans is not None else {}
        """Plans by shape, shared by the parsers of one factory (one is made per answer)."""
        self._bound_plans = bound if bound is not None else {}
        """The members bound to headers, by shape, shared the same way."""

    def _plan(self, shape: Any) -> _Plan | None:
        """The shape's plan, or None when botocore's walk must parse it."""
        key, kept = _shape_key(shape)
        held = self._plans.get(key)
        if held is not None and held[0] is kept:
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
        self._plans[key] = (kept, plan)
        return plan

    def _parse_non_payload_attrs(
        self, response: dict[str, Any], shape: Any, member_shapes: Any, final_parsed: Any
    ) -> None:
        """botocore's walk of the members bound to the status and the headers, looked up
        in one lower-cased copy of the headers: botocore asks the case-insensitive
        header map once per member (GetObject's output has 30 header members), about a
        tenth of an object GET's CPU."""
        headers = response["headers"]
        lowered = _lowered(headers)
        for name, member, location, header in self._bound(shape, member_shapes):
            if location == "header":
                value = lowered.get(header)
                if value is not None:
                    final_parsed[name] = self._parse_shape(member, value)
            elif location == "statusCode":
                final_parsed[name] = self._parse_shape(member, response["status_code"])
            else:  # "headers": a map of the headers with a prefix (user metadata)
                final_parsed[name] = self._parse_header_map(member, headers)

    def _bound(self, shape: Any, member_shapes: Any) -> _Bound:
        """The members bound to the status or headers, in the shape's order: by shape
        (the output's own members, as botocore passes them), planned once."""
        key, kept = _shape_key(shape)
        held = self._bound_plans.get(key)
        if held is not None and held[0] is kept:
            return held[1]
        bound: list[tuple[str, Any, str, str]] = []
        for name in member_shapes:
            member = member_shapes[name]
            location = member.serialization.get("location")
            if location in ("header", "statusCode", "headers"):
                header = str(member.serialization.get("name", name)).lower()
                bound.append((name, member, location, header))
        plan = tuple(bound)
        if member_shapes is shape.members:  # as botocore passes them: the shape's own
            self._bound_plans[key] = (kept, plan)
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


_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG = b"0" * 19
"""Digits enough to be an integer orjson would not keep whole (DynamoDB sends its
numbers as strings: such a run is rare, and parsed by json). Found by ``translate``
and ``find``: a regular expression costs ten times as much."""
_Convert = Callable[[Any, Any], Any]
"""A value's conversion (the value, the parser parsing it); None: kept as it is."""


class PlannedJSONParser(AioJSONParser):  # type: ignore[misc]
    """DynamoDB's ``json`` parser: each shape's values converted by a function made
    once per shape (kept by the factory across answers)."""

    def __init__(
        self,
        *args: Any,
        plans: dict[tuple[int, str], tuple[Any, _Convert | None]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._converts = plans if plans is not None else {}

    def _parse_body_as_json(self, body_contents: bytes) -> Any:
        """The body by orjson (a third of json's CPU); what it refuses that json takes
        (NaN, a lone surrogate), a run of 19 digits or more (orjson reads an integer past
        64 bits as a float; json keeps it whole), or no JSON, as botocore does."""
        if body_contents and bytes(body_contents).translate(_DIGITS).find(_LONG) < 0:
            try:
                return orjson.loads(body_contents)
            except orjson.JSONDecodeError:
                pass
        return super()._parse_body_as_json(body_contents)

    def _parse_shape(self, shape: Any, node: Any) -> Any:
        convert = self._convert(shape)
        return node if convert is None else convert(node, self)

    def _botocore(self, shape: Any, node: Any) -> Any:
        """botocore's own handler of ``shape`` (nested values come back here)."""
        return super()._parse_shape(shape, node)

    def _convert(self, shape: Any) -> _Convert | None:
        """The conversion of ``shape``'s values (botocore makes a shape object per
        reference: it is kept by the shape's name, :func:`_shape_key`)."""
        key, kept = _shape_key(shape)
        held = self._converts.get(key)
        if held is not None and held[0] is kept:
            return held[1]
        made: list[_Convert | None] = []
        # a recursive shape (a typed value holding a map of typed values) reaches
        # itself while it is made: through this, until it is
        self._converts[key] = (kept, lambda v, p: made[0](v, p) if made[0] else v)
        convert = self._make(shape)
        made.append(convert)
        self._converts[key] = (kept, convert)
        return convert

    def _make(self, shape: Any) -> _Convert | None:
        kind = shape.type_name
        if kind == "blob":
            return _blob
        if kind == "list":
            item = self._convert(shape.member)
            if item is None:
                return _copied_list
            return lambda v, p: [None if x is None else item(x, p) for x in v]
        if kind == "map" and shape.key.type_name == "string":
            value = self._convert(shape.value)
            if value is None:
                return lambda v, p: dict(v) if isinstance(v, dict) else p._botocore(shape, v)
            return lambda v, p: (
                {k: value(x, p) for k, x in v.items()}
                if isinstance(v, dict)
                else p._botocore(shape, v)
            )
        if kind == "structure" and not (
            shape.metadata.get("exception", False)
            or getattr(shape, "is_tagged_union", False)
            or getattr(shape, "is_document_type", False)
            or shape.event_stream_name
        ):
            return self._structure(shape)
        if kind in ("structure", "map", "timestamp") or shape.serialization.get("eventstream"):
            return lambda v, p: p._botocore(shape, v)
        return None  # botocore's JSON parser keeps these as they are

    def _structure(self, shape: Any) -> _Convert:
        members: dict[str, tuple[str, _Convert | None]] = {}
        for name, member in shape.members.items():
            members[member.serialization.get("name", name)] = (name, None)
        for name, member in shape.members.items():  # after: a member may be the shape
            members[member.serialization.get("name", name)] = (name, self._convert(member))

        def structure(value: Any, parser: Any) -> Any:
            if not isinstance(value, dict):
                return parser._botocore(shape, value)
            parsed: dict[str, Any] = {}
            if len(value) == 1:  # a typed value ({"S": ...}): its one member
                ((json_name, raw),) = value.items()
                found = members.get(json_name)
                if found is not None and raw is not None:
                    name, convert = found
                    parsed[name] = raw if convert is None else convert(raw, parser)
                return parsed
            for json_name, (name, convert) in members.items():  # in the members' order
                raw = value.get(json_name)
                if raw is not None:
                    parsed[name] = raw if convert is None else convert(raw, parser)
            return parsed

        return structure


def _blob(value: Any, parser: Any) -> Any:
    return parser._blob_parser(value)


def _copied_list(value: Any, parser: Any) -> Any:
    return list(value)


class PlannedParserFactory(AioResponseParserFactory):  # type: ignore[misc]
    """aiobotocore's parser factory, with :class:`PlannedXMLParser` for ``rest-xml`` and
    :class:`PlannedJSONParser` for ``json`` (their plans kept across answers) and
    :func:`parse_timestamp` for every protocol."""

    def __init__(self) -> None:
        super().__init__()
        self.set_parser_defaults(timestamp_parser=parse_timestamp)
        self._plans: dict[tuple[int, str], tuple[Any, _Plan | None]] = {}
        self._bound: dict[tuple[int, str], tuple[Any, _Bound]] = {}
        self._json_plans: dict[tuple[int, str], tuple[Any, _Convert | None]] = {}

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "rest-xml":
            return PlannedXMLParser(plans=self._plans, bound=self._bound, **self._defaults)
        if protocol_name == "json":
            return PlannedJSONParser(plans=self._json_plans, **self._defaults)
        return super().create_parser(protocol_name)
