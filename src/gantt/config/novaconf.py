"""nova.conf as oslo.config reads it: its INI dialect, the spellings of its values, and what Gantt does with each
of Nova's options in the sections it reads.

A nova.conf written for Nova must start Gantt. So the file is read with oslo.config's rules, not configparser's
(``key: value`` as well as ``key = value``, one pair of surrounding quotes dropped, indented lines continuing a
value, an option given twice keeping its last value, a multi-valued option keeping all), and each value is
converted with the rules of oslo.config's types (``oslo_config/types.py``): ``yes``/``on``/``1`` are true, lists
are comma-separated, and so on.

Nova's options in a section Gantt reads fall in three kinds:

- used: they decide as in Nova (``gantt.config``'s sections hold them);
- read, not used by Gantt (``NOT_USED``): they change nothing Gantt decides (a cell's discovery, a periodic
  task, nova-compute's own settings); accepted at any value and listed once at start;
- refused unless at Nova's default (the sections' ``*_WITHOUT_EFFECT`` tables in ``gantt.config``): they would
  change a placement in Nova and Gantt does not implement them, so an operator must not believe them in force.

A name that is none of these (a typo, an option of no Nova release) is an error in a section whose options
decide placements, and listed with the unused ones in ``[DEFAULT]`` and ``[compute]``, which hold every service's
options.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from gantt.model import InvalidRequest

# ------------------------------------------------------------------------------------ the INI dialect


class IniError(ValueError):
    def __init__(self, lineno: int, message: str) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


Sections = dict[str, dict[str, list[str]]]


def read_ini(text: str) -> Sections:
    """``{section: {option: [value, …]}}``: every assignment of an option in file order (oslo.config keeps the
    last for a single-valued option and all for a multi-valued one). A sections given twice is one section."""
    sections: Sections = {}
    current: dict[str, list[str]] | None = None
    key: str | None = None
    value: list[str] = []

    def flush() -> None:
        nonlocal key, value
        if key is not None:
            assert current is not None
            current.setdefault(key, []).append("\n".join(value))
        key, value = None, []

    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.rstrip()
        if not line:
            flush()  # a blank line ends a multi-line value
            continue
        if line.startswith((" ", "\t")):
            if key is None:
                raise IniError(lineno, f"{line.strip()!r} is indented, so it continues a value, but no option "
                                       "comes before it")
            value.append(line.lstrip())
            continue
        flush()
        if line.startswith("["):
            if not line.endswith("]"):
                raise IniError(lineno, f"{line!r} is not a [section] header (a missing ']'?)")
            name = line[1:-1]
            if not name:
                raise IniError(lineno, "an empty section name '[]'")
            current = sections.setdefault(name, {})
        elif line.startswith(("#", ";")):
            continue
        else:
            colon, equal = line.find(":"), line.find("=")
            if colon < 0 and equal < 0:
                raise IniError(lineno, f"cannot parse {line!r}: not 'option = value'")
            cut = equal if colon < 0 or 0 <= equal < colon else colon
            name, raw = line[:cut].strip(), line[cut + 1:].strip()
            if not name:
                raise IniError(lineno, f"cannot parse {line!r}: no option name before the '{line[cut]}'")
            if current is None:
                raise IniError(lineno, f"{line!r} comes before the first [section] header")
            if raw and raw[0] == raw[-1] and raw[0] in "\"'":
                raw = raw[1:-1]
            key, value = name, [raw]
    flush()
    return sections


# ---------------------------------------------------------------------------- the spellings of values
# oslo.config's types, as oslo_config/types.py (oslo.config 10.7, Nova 34's) converts a string.

TRUE = ("true", "1", "on", "yes")
FALSE = ("false", "0", "off", "no")


def oslo_bool(raw: str) -> bool:
    low = raw.lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    raise ValueError(f"not a boolean (oslo.config takes {', '.join(TRUE)} and {', '.join(FALSE)}, any case)")


def oslo_int(raw: str) -> int | None:
    """None for an empty value, as oslo.config gives."""
    if not raw.strip():
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError("not an integer") from None


def oslo_float(raw: str) -> float | None:
    if not raw.strip():
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError("not a number") from None


def oslo_list(raw: str) -> list[str]:
    """Comma-separated strings (oslo's ``List(String())``): items stripped, one trailing comma ignored, an empty
    value the empty list; an empty item between two commas stays."""
    text = raw.strip().rstrip(",")
    return [item.strip() for item in text.split(",")] if text else []


def oslo_dict(raw: str) -> dict[str, str]:
    """``key:value`` pairs separated by commas (oslo's ``Dict(String())``): a piece without a ':' is joined to
    the next one (a value may hold commas), names and values stripped."""
    out: dict[str, str] = {}
    text = raw.strip()
    if not text:
        return out
    pieces = text.split(",")
    while pieces:
        pair = pieces.pop(0)
        while ":" not in pair:
            if not pieces:
                raise ValueError("not NAME:VALUE pairs separated by ','")
            pair += "," + pieces.pop(0)
        name, _, value = pair.partition(":")
        name = name.strip()
        if not name:
            raise ValueError("a pair without a name")
        if name in out:
            raise ValueError(f"{name!r} given twice")
        out[name] = value.strip()
    return out


def convert(raw: str, kind: Any, where: str) -> Any:
    """The value of one option whose Gantt type is ``kind`` (a Struct field's annotation), as oslo.config would
    read it for Nova's option of that type. InvalidRequest names ``where`` (``[section] option``)."""
    optional = False
    args = typing.get_args(kind)
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        optional = type(None) in args
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            kind = rest[0]
    origin = typing.get_origin(kind) or kind
    try:
        if kind is bool:
            return oslo_bool(raw)
        if kind is int or kind is float:
            number = oslo_int(raw) if kind is int else oslo_float(raw)
            if number is None and not optional:
                raise ValueError("empty: give a number, or leave the option out for its default")
            return number
        if origin is list:
            return oslo_list(raw)
        if origin is dict:
            return oslo_dict(raw)
    except ValueError as exc:
        raise InvalidRequest(f"{where} = {raw!r}: {exc}", field=where) from None
    if optional and kind is str:
        return raw  # oslo.config: an empty StrOpt is '' (only leaving it out gives None)
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        for cast in (oslo_int, oslo_float):  # e.g. float | Literal["auto"]
            try:
                if (number := cast(raw)) is not None:
                    return number
            except ValueError:
                pass
    return raw


# ------------------------------------------------------------------------ Nova's options Gantt reads

# Options of Nova (34, and a few of earlier releases a nova.conf may still carry) in the sections Gantt reads that
# change nothing Gantt decides: accepted at any value, listed at start as read, not used. Why, option by option:
NOT_USED: dict[str, dict[str, str]] = {
    "filter_scheduler": {
        "track_instance_changes": "Gantt always tracks instances from host reports and instance-info calls",
        "cross_cell_move_weight_multiplier": "Gantt has no cells: CrossCellWeigher would weigh every host alike",
        "image_props_weight_setting": "read by ImagePropertiesWeigher only, whose multiplier must stay 0",
    },
    "scheduler": {
        "discover_hosts_in_cells_interval": "Gantt has no cells; hosts appear when they report",
        "periodic_task_interval": "Gantt runs no periodic tasks (removed from Nova)",
    },
    "pci": {
        "device_spec": "nova-compute's (which devices a host reports)",
        "passthrough_whitelist": "nova-compute's (device_spec's old name)",
        "report_in_placement": "nova-compute's (whether it reports devices to Placement)",
    },
    "oslo_policy": {
        "remote_content_type": "Gantt's policy has no remote (http:) checks",
        "remote_ssl_verify_server_crt": "Gantt's policy has no remote (http:) checks",
        "remote_ssl_ca_crt_file": "Gantt's policy has no remote (http:) checks",
        "remote_ssl_client_crt_file": "Gantt's policy has no remote (http:) checks",
        "remote_ssl_client_key_file": "Gantt's policy has no remote (http:) checks",
        "remote_timeout": "Gantt's policy has no remote (http:) checks",
    },
}

# Sections whose every option is some service's (nova-compute's, oslo.log's, …): a name Gantt does not know there
# is read, not used, rather than a typo in a placement option.
LENIENT = {"DEFAULT", "compute", "workarounds"}


def set_aside_unused(data: dict[str, Any]) -> dict[str, list[str]]:
    """Take Nova's options that change nothing Gantt decides (``NOT_USED``) out of ``data``'s sections;
    returns their names by section."""
    out: dict[str, list[str]] = {}
    for section, names in NOT_USED.items():
        values = data.get(section)
        if isinstance(values, dict) and any(name in values for name in names):
            out[section] = [name for name in values if name in names]
            data[section] = {k: v for k, v in values.items() if k not in names}
    return out


def unknown_option(section: str, name: str, known: set[str]) -> InvalidRequest:
    near = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return InvalidRequest(f"[{section}] {name} is not an option of Nova 34's [{section}] nor of Gantt's{hint}: "
                          "a typo here would change placements silently", field=f"{section}.{name}")
