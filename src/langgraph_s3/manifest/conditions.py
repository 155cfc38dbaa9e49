"""Conditions as data: what the manifest asks of a table (a condition and a change on
an item), in DynamoDB's attribute format (an object store's put says its condition
with :data:`~langgraph_s3.core.put_mode.PutMode`).

The manifest's rules (``langgraph_s3.manifest``) say each conditional write as a
:data:`Cond` and a :class:`Change`; a table (:class:`~langgraph_s3.manifest.table.TablePort`)
carries them out atomically. DynamoDB's adapter renders them as a ConditionExpression and
an UpdateExpression (``manifest/dynamodb.py``); the in-memory table evaluates them in
Python (``testing/table.py``). The rules are written once; the two tables are held to
the same contract (``tests/unit/test_contract_table.py``), as SlateDB holds its
object-store CAS to one trait and Arrow's ``object_store`` says ``PutMode`` as data.

Values are DynamoDB's typed attribute values (``{"S": "x"}``, ``{"N": "1"}``,
``{"SS": [...]}``, ``{"BOOL": True}``, ``{"M": {...}}``), the items' own format. The
semantics are DynamoDB's: a comparison with a missing attribute, or one of another type,
is false; ``contains`` is membership for a set and a substring test for a string; sets
compare as sets; ``ADD`` adds to a number (a missing one counts as 0) or unites sets;
``DELETE`` takes elements out of a set (one left empty goes); an update of a missing item
creates it from its key. What DynamoDB refuses is refused here, before any request: an
empty set, a path named by two actions of one change, an ``ADD`` of something other than
a number or a set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BOOL",
    "SS",
    "TX_ITEMS",
    "Absent",
    "All",
    "AnyOf",
    "Change",
    "Compare",
    "Cond",
    "Contains",
    "Exists",
    "N",
    "Not",
    "S",
    "TxCheck",
    "TxDelete",
    "TxPut",
    "TxUpdate",
    "TxWrite",
    "all_of",
    "any_of",
    "eq",
]

Value = dict[str, Any]
"""One typed attribute value, as DynamoDB's API writes it."""
Op = Literal["=", "<", "<=", ">", ">="]
OPS: tuple[Op, ...] = ("=", "<", "<=", ">", ">=")
"""The comparisons (no ``<>``: write ``Not(eq(...))``, whose meaning on a missing
attribute is plain)."""


def S(text: str) -> Value:
    """A string value."""
    return {"S": text}


def N(number: int | float) -> Value:
    """A number value (written exactly: stamps are nanoseconds, beyond a float)."""
    return {"N": str(number)}


def SS(values: Iterable[str]) -> Value:
    """A string set; DynamoDB has no empty set (leave the attribute out, or REMOVE it)."""
    out = sorted(set(values))
    if not out:
        raise ValueError("a string set may not be empty (DynamoDB refuses one): omit it")
    return {"SS": out}


def BOOL(flag: bool) -> Value:
    """A boolean value."""
    return {"BOOL": flag}


@dataclass(frozen=True)
class Exists:
    """``attribute_exists(path)``."""

    path: str


@dataclass(frozen=True)
class Absent:
    """``attribute_not_exists(path)``."""

    path: str


@dataclass(frozen=True)
class Compare:
    """``path <op> value``: false when the attribute is missing or of another type."""

    path: str
    op: Op
    value: Value

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown comparison {self.op!r}: one of {', '.join(OPS)}")


@dataclass(frozen=True)
class Typed:
    """``attribute_type(path, kind)``: the attribute is there, of DynamoDB type ``kind``."""

    path: str
    kind: str


@dataclass(frozen=True)
class Contains:
    """``contains(path, value)``: a set holds it, or a string has it as a substring."""

    path: str
    value: Value


@dataclass(frozen=True)
class All:
    """Every part holds (``a AND b``)."""

    parts: tuple[Cond, ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("All() of no condition: DynamoDB has no empty condition")


@dataclass(frozen=True)
class AnyOf:
    """Some part holds (``a OR b``)."""

    parts: tuple[Cond, ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("AnyOf() of no condition: DynamoDB has no empty condition")


@dataclass(frozen=True)
class Not:
    """The part does not hold (``NOT a``)."""

    part: Cond


Cond = Exists | Absent | Typed | Compare | Contains | All | AnyOf | Not
"""A condition on one item, as data."""


def eq(path: str, value: Value) -> Compare:
    """``path = value``."""
    return Compare(path, "=", value)


def all_of(*parts: Cond | None) -> Cond | None:
    """The conjunction of the given conditions (None ones left out; None for none)."""
    kept: list[Cond] = []
    for part in parts:
        if isinstance(part, All):
            kept.extend(part.parts)
        elif part is not None:
            kept.append(part)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else All(tuple(kept))


def any_of(*parts: Cond) -> Cond:
    """The disjunction of the given conditions (at least one)."""
    if not parts:
        raise ValueError("any_of needs at least one condition")
    return parts[0] if len(parts) == 1 else AnyOf(tuple(parts))


@dataclass(frozen=True)
class Change:
    """What one update does to an item: its SET, REMOVE, ADD and DELETE actions.

    Top-level attribute names only (the manifest never updates inside a map). A name
    may appear in one action only (DynamoDB: "Two document paths overlap").
    """

    set: Mapping[str, Value] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    add: Mapping[str, Value] = field(default_factory=dict)
    delete: Mapping[str, Value] = field(default_factory=dict)

    def __post_init__(self) -> None:
        named = [*self.set, *self.remove, *self.add, *self.delete]
        nested = sorted(n for n in named if "." in n)
        if nested:
            raise ValueError(f"an update names {nested}: top-level attributes only")
        twice = sorted({n for n in named if named.count(n) > 1})
        if twice:
            raise ValueError(f"an update names {twice} in two actions (DynamoDB refuses it)")
        if not named:
            raise ValueError("an update must do something (DynamoDB refuses an empty one)")
        for name, value in self.add.items():
            if set(value) - {"N", "SS"}:
                raise ValueError(f"ADD {name}: only a number or a string set can be added")
        for name, value in self.delete.items():
            if set(value) != {"SS"}:
                raise ValueError(f"DELETE {name}: only a string set's elements can be deleted")
        for value in [*self.set.values(), *self.add.values(), *self.delete.values()]:
            if "SS" in value and not value["SS"]:
                raise ValueError("a string set may not be empty (DynamoDB refuses one)")

    def also(
        self,
        *,
        set: Mapping[str, Value] | None = None,
        remove: Iterable[str] = (),
        add: Mapping[str, Value] | None = None,
        delete: Mapping[str, Value] | None = None,
    ) -> Change:
        """This change with more actions (validated again as a whole)."""
        return Change(
            {**self.set, **(set or {})},
            (*self.remove, *remove),
            {**self.add, **(add or {})},
            {**self.delete, **(delete or {})},
        )


# ------------------------------------------------------------ a table's transaction
@dataclass(frozen=True)
class TxCheck:
    """A transaction's condition on an item it does not write (DynamoDB's
    ConditionCheck): the whole transaction happens only if ``when`` holds of it."""

    key: Value
    when: Cond


@dataclass(frozen=True)
class TxUpdate:
    """A transaction's update of one item (an UpdateItem's change and condition)."""

    key: Value
    change: Change
    when: Cond | None = None


@dataclass(frozen=True)
class TxPut:
    """A transaction's write of one whole item (its key inside it)."""

    item: Value
    when: Cond | None = None


@dataclass(frozen=True)
class TxDelete:
    """A transaction's deletion of one item."""

    key: Value
    when: Cond | None = None


TxWrite = TxCheck | TxUpdate | TxPut | TxDelete
"""One part of a table's all-or-nothing transaction (DynamoDB's TransactWriteItems)."""
TX_ITEMS = 100
"""The most items one transaction may name (DynamoDB's limit)."""
