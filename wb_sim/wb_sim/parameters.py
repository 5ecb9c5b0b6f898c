"""How a parameter is declared, and its one validation.

A :class:`Param` says everything about a parameter once: its type, default,
unit, meaning, range or choices, and whether it may change while the
simulation runs. From it come the YAML and Python checks
(:meth:`Param.coerce`, the only place a value is validated), the ROS node's
``ParameterDescriptor`` (:func:`wb_sim.ros.parameters.descriptor`) and the
README's tables (:func:`table_markdown`).

The declarations themselves live with what they configure: the core's in
:mod:`wb_sim.config`, each contact model's in its own module, the ROS node's
in :mod:`wb_sim.ros.parameters`.
"""

from __future__ import annotations

import array
import difflib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from .errors import ConfigError

#: the value kinds: scalars and lists (``floats``, ``strs``)
KINDS = ("float", "int", "bool", "str", "floats", "strs")


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    ``kind`` is one of :data:`KINDS`. ``length`` fixes the length of a list
    (``None``: any). ``lo`` / ``hi`` bound a number (for ``floats``, every
    entry), ``lo_open`` makes the lower bound strict (``> lo``). ``choices``
    lists the valid strings. ``check`` is a further test returning an error
    text or ``None`` (a unit vector, a topic name). ``live`` parameters may
    change on a running simulator (ROS: ``ros2 param set``); the others are
    read-only once it is built.
    """

    key: str
    kind: str
    default: Any
    unit: str
    doc: str
    length: int | None = None
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], str | None] | None = None
    live: bool = False

    def __post_init__(self):
        assert self.kind in KINDS, self.kind
        if self.choices is not None:
            assert self.default in self.choices, (self.key, self.default)

    @property
    def default_value(self) -> Any:
        """The default as :meth:`coerce` would return it (lists as tuples)."""
        return tuple(self.default) if isinstance(self.default, list) else self.default

    def range_text(self) -> str | None:
        """The range as the error messages say it, with the unit (``None``: unbounded)."""
        fmt = str if self.kind == "int" else (lambda x: f"{x:g}")
        if self.lo is not None and self.hi is not None:
            text = f"in [{fmt(self.lo)}, {fmt(self.hi)}]"
        elif self.lo is not None:
            text = f"{'>' if self.lo_open else '>='} {fmt(self.lo)}"
        elif self.hi is not None:
            text = f"<= {fmt(self.hi)}"
        else:
            return None
        return f"{text} {self.unit}" if self.unit else text

    def _in_range(self, x: float) -> bool:
        return ((self.lo is None or (x > self.lo if self.lo_open else x >= self.lo))
                and (self.hi is None or x <= self.hi))

    def coerce(self, value: Any, key: str | None = None) -> Any:
        """``value`` converted to this parameter's kind and checked, or a
        :class:`ConfigError` naming ``key`` (default: :attr:`key`), what is wrong
        and what is valid."""
        key = self.key if key is None else key

        def bad(why: str) -> ConfigError:
            return ConfigError(f"parameter '{key}': {why} (got {value!r})")

        kind = self.kind
        if kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise bad("expected a bool")
            out: Any = bool(value)
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise bad("expected an integer")
            out = int(value)
        elif kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                                 np.floating)):
                raise bad("expected a number")
            out = float(value)
            if not math.isfinite(out):
                raise bad("must be finite")
        elif kind == "str":
            if not isinstance(value, str):
                raise bad("expected a string")
            out = value
        else:  # floats, strs
            if isinstance(value, (int, float)) and not isinstance(value, bool) and kind == "floats":
                value = [value]
            if isinstance(value, (np.ndarray, array.array)):  # array: rclpy's live array values
                value = value.tolist()
            if not isinstance(value, (list, tuple)):
                raise bad("expected a list")
            if kind == "strs":
                if not all(isinstance(v, str) for v in value):
                    raise bad("expected a list of strings")
                out = tuple(value)
            else:
                if not all(isinstance(v, (int, float, np.integer, np.floating))
                           and not isinstance(v, bool) for v in value):
                    raise bad("expected a list of numbers")
                out = tuple(float(v) for v in value)
                if not all(math.isfinite(v) for v in out):
                    raise bad("every entry must be finite")
            if self.length is not None and len(out) != self.length:
                raise bad(f"expected {self.length} entries")
        rng = self.range_text()
        if rng is not None:
            if kind == "floats":
                if not all(self._in_range(v) for v in out):
                    raise bad(f"every entry must be {rng}")
            elif not self._in_range(out):
                raise bad(f"must be {rng}")
        if self.check is not None:  # first: it may say more than the list of choices
            why = self.check(out)
            if why:
                raise bad(why)
        if self.choices is not None and out not in self.choices:
            raise bad(f"must be one of {', '.join(map(repr, self.choices))}")
        return out


def by_key(params: Iterable[Param]) -> dict[str, Param]:
    """``{key: Param}``; a key declared twice is a table error."""
    out: dict[str, Param] = {}
    for p in params:
        assert p.key not in out, f"parameter '{p.key}' declared twice"
        out[p.key] = p
    return out


def unknown_key_error(key: str, known: Iterable[str]) -> ConfigError:
    """The error for an undeclared key, with the closest declared ones."""
    close = difflib.get_close_matches(key, list(known), n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ConfigError(f"unknown parameter '{key}'{hint}")


def table_markdown(rows: Iterable[tuple[str, Param]]) -> str:
    """A Markdown table of ``(key, Param)`` rows: type, default (in its YAML
    spelling), unit, live and meaning (with the range or choices)."""
    out = ["| parameter | type | default | unit | live | meaning |", "|---|---|---|---|---|---|"]
    for key, p in rows:
        out.append(f"| `{key}` | {p.kind} | `{json.dumps(p.default)}` | {p.unit} | "
                   f"{'yes' if p.live else ''} | {p.doc.replace('|', chr(92) + '|')} |")
    return "\n".join(out)


class Group(Mapping):
    """Validated values of a parameter group, read as attributes
    (``config.contact.stiffness``) or items; frozen."""

    def __init__(self, values: Mapping[str, Any]):
        object.__setattr__(self, "_values", dict(values))
        # the values are instance attributes too, so that reading one is a plain attribute
        # lookup (0.05 us) and not a failed one followed by __getattr__ (0.85 us: the node
        # read a few per step); a name the class itself uses stays behind __getattr__
        for name, value in self._values.items():
            if not hasattr(type(self), name):
                object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no parameter '{name}' in this group "
                                 f"({', '.join(self._values)})") from None

    def __setattr__(self, name, value):
        raise AttributeError("parameters are read-only; build a new configuration")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"

    def __getstate__(self):
        return self._values

    def __setstate__(self, state):
        self.__init__(state)

