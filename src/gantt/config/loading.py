"""Reading a configuration file: TOML (``gantt.toml``), or a nova.conf with oslo.config's rules, each option
converted to its section's type; what the file holds that Gantt reads but does not use is listed."""

from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

from gantt.config import novaconf
from gantt.config.options import Config
from gantt.config.placement import OSLO_POLICY_FILE
from gantt.config.volume import VolumeOptions
from gantt.model.errors import InvalidRequest

log = logging.getLogger(__name__)


def load_config(path: str | os.PathLike[str] | None = None, *, log_unused: bool = True) -> Config:
    """Read a TOML file (or a nova.conf, with oslo.config's rules); ``None`` gives Nova's defaults.

    ``GANTT_CONFIG`` names the file when ``path`` is None. ``log_unused``: list the options and sections read
    but not used by Gantt (INFO); ``gantt serve`` does it once, not in every worker.
    """
    if path is None:
        path = os.environ.get("GANTT_CONFIG")
        if not path:
            return Config()
    p = Path(path)
    text = p.read_text()
    if p.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidRequest(f"{p}: {exc}") from None
        unused = novaconf.set_aside_unused(data)
    else:
        try:
            sections = novaconf.read_ini(text)
        except novaconf.IniError as exc:
            raise InvalidRequest(f"{p}: {exc}") from None
        data, unused = _ini_to_dict(sections)
    policy = data.get("oslo_policy")
    if isinstance(policy, dict) and isinstance(policy.get("policy_file"), str):
        named = p.parent / policy["policy_file"]  # relative: beside the configuration file
        # oslo.policy's default name, which a nova.conf carries: absent, oslo.policy uses the rules in code, and so
        # does Gantt. A file named otherwise must be there.
        policy["policy_file"] = None if policy["policy_file"] == OSLO_POLICY_FILE and not named.exists() \
            else str(named)
    config = Config.from_dict(data)
    if log_unused:
        _log_unused(p, unused)
    return config


def _log_unused(path: Path, unused: dict[str, list[str]]) -> None:
    for section, names in unused.items():
        if section:
            log.info("%s: [%s] options read, not used by Gantt: %s", path, section, ", ".join(names))
    if unused.get(""):
        log.info("%s: sections read, not used by Gantt: %s", path, ", ".join(unused[""]))


# Config's sections by their name in the file ("DEFAULT" for ``default``): a section added to Config is read too.
_SECTIONS: dict[str, type[Struct]] = {f.encode_name: f.type for f in msgspec.structs.fields(Config)
                                      if isinstance(f.type, type) and issubclass(f.type, Struct)}
# oslo.config's MultiStrOpt: the option is given once per value, and every value is kept.
_MULTI_OPTIONS = {("pci", "alias"), ("DEFAULT", "pci_alias"), ("oslo_policy", "policy_dirs")}


def _ini_to_dict(sections: novaconf.Sections) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The file's sections as Config.from_dict takes them, each option converted to its type as oslo.config would;
    and the options and sections (key ``""``) read but not used, by section."""
    data: dict[str, Any] = {}
    unused: dict[str, list[str]] = {}
    for section, options in sections.items():
        if section.startswith("namespace:"):
            data[section] = _ini_namespace(section, options, unused)
        elif section in _SECTIONS:
            data[section] = _typed_section(section, section, _SECTIONS[section], options, unused)
        else:
            unused.setdefault("", []).append(section)
    default = sections.get("DEFAULT", {})
    if "pci_alias" in default:  # the option's name before it moved to [pci] (Nova still reads it)
        pci = data.setdefault("pci", {})
        if "alias" in pci:
            raise InvalidRequest("[DEFAULT] pci_alias is the old name of [pci] alias: give one of them")
        pci["alias"] = default["pci_alias"]
        unused["DEFAULT"].remove("pci_alias")
        if not unused["DEFAULT"]:
            del unused["DEFAULT"]
    return data, unused


def _typed_section(label: str, section: str, cls: type[Struct], options: dict[str, list[str]],
                   unused: dict[str, list[str]]) -> dict[str, Any]:
    """One section's options by ``cls``'s fields: each converted to the field's type with oslo.config's spellings
    (the last value of an option given twice; all of a multi-valued one). A name that is not a field is read, not
    used (``novaconf.NOT_USED``, or any in ``[DEFAULT]`` and ``[compute]``), else refused as a typo."""
    fields = {f.name: f for f in msgspec.structs.fields(cls)}
    not_used = novaconf.NOT_USED.get(section, {})
    values: dict[str, Any] = {}
    for name, given in options.items():
        found = fields.get(name)
        if found is None:
            if name in not_used or section in novaconf.LENIENT:
                unused.setdefault(label, []).append(name)
                continue
            raise novaconf.unknown_option(label, name, set(fields) | set(not_used))
        if (section, name) in _MULTI_OPTIONS:
            values[name] = given
        else:
            values[name] = novaconf.convert(given[-1], found.type, f"[{label}] {name}")
    return values


def _ini_namespace(section: str, options: dict[str, list[str]], unused: dict[str, list[str]]) -> dict[str, Any]:
    """``[namespace:<name>]`` (its kind, a volume namespace's options) or ``[namespace:<name>:<section>]`` (one of
    a compute namespace's sections), converted as the top-level sections are."""
    own = section.split(":", 2)[2] if section.count(":") >= 2 else None
    if own is not None:
        cls = _SECTIONS.get(own)
        if cls is None:  # not a section a namespace has: Config.namespaces() says so
            return {name: given[-1] for name, given in options.items()}
        return _typed_section(section, own, cls, options, unused)
    values: dict[str, Any] = {name: given[-1] for name, given in options.items()}
    if values.get("kind") == "volume":
        types_ = {f.name: f.type for f in msgspec.structs.fields(VolumeOptions)}
        for name, raw in values.items():
            if name in types_:
                values[name] = novaconf.convert(raw, types_[name], f"[{section}] {name}")
    return values

