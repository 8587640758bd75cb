"""Issue 34 item 3: a real nova.conf starts Gantt.

The file Nova's own tooling writes (``oslo-config-generator`` with Nova 34's namespaces, run from the reference
venv at test time, every option with a default uncommented at that default) loads, each option Gantt uses at
Nova's default and read as oslo.config reads it; ``gantt serve`` starts with it and lists what it reads but does
not use once. Values spelled every way oslo.config takes them (generated, several seeds) read as oslo.config
itself reads them, and what oslo.config refuses Gantt refuses, naming the section and option.
"""

from __future__ import annotations

import logging
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gantt import InvalidRequest
from gantt.config import Config, load_config, novaconf
from tests.parity.reference import python as nova_python
from tests.venvs import run_json

DRIVER = Path(__file__).parent / "parity" / "nova_conf_driver.py"
TYPES_DRIVER = Path(__file__).parent / "parity" / "oslo_types_driver.py"
# Nova's etc/nova/nova-config-generator.conf (34.0.0): the namespaces of the sample nova.conf.
NAMESPACES = ["nova.conf", "oslo.log", "oslo.messaging", "oslo.policy", "oslo.privsep", "oslo.service.periodic_task",
              "oslo.service.service", "oslo.middleware", "oslo.concurrency", "keystonemiddleware.auth_token",
              "osprofiler"]
OPTION = re.compile(r"^#([A-Za-z0-9_.-]+) =(?: (.*))?$")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Nova 34's sample nova.conf with every option that has a default uncommented at it. An option whose default
    is ``<None>`` stays commented: an INI file cannot write None (leaving the option out is how)."""
    where = tmp_path_factory.mktemp("nova-conf")
    generated = where / "nova.conf.sample"
    generator = nova_python().parent / "oslo-config-generator"
    argv = [str(generator), "--output-file", str(generated)]
    for namespace in NAMESPACES:
        argv += ["--namespace", namespace]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and generated.exists(), done.stderr[-3000:]
    lines = []
    uncommented = 0
    for line in generated.read_text().splitlines():
        found = OPTION.match(line)
        if found and found.group(2) != "<None>":
            line = line[1:]
            uncommented += 1
        lines.append(line)
    assert uncommented > 500  # the whole of Nova's options, not a section of them
    conf = where / "nova.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _reference(conf: Path, options: list[tuple[str, str]]) -> dict[str, Any]:
    return run_json(nova_python(), DRIVER, {"conf": str(conf), "options": options}, timeout=300)


def _gantt_options() -> list[tuple[str, str]]:
    """Every option of Gantt's sections that are nova.conf's too, by section and name."""
    config = Config()
    out = []
    for section in ("filter_scheduler", "scheduler", "metrics", "DEFAULT", "compute", "oslo_policy", "cors"):
        values = getattr(config, "default" if section == "DEFAULT" else section)
        out += [(section, name) for name in values.__struct_fields__]
    return out


def _value(config: Config, section: str, name: str) -> Any:
    return getattr(getattr(config, "default" if section == "DEFAULT" else section), name)


def test_the_sample_nova_conf_loads_at_novas_defaults(sample: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gantt.config"):
        config = load_config(sample)
    # Every section that decides placements is at Nova's defaults, which are Gantt's.
    for section in ("filter_scheduler", "scheduler", "metrics", "default", "compute", "pci"):
        assert msgspec.to_builtins(getattr(config, section)) == msgspec.to_builtins(getattr(Config(), section)), \
            section
    assert config.oslo_policy.policy_file is None  # policy.yaml, oslo.policy's default name, is not there
    # And every option both know reads as oslo.config reads it from the same file.
    options = _gantt_options()
    reference = _reference(sample, options)
    compared = 0
    for section, name in options:
        theirs = reference[f"{section}.{name}"]
        if theirs.get("unknown") or (section, name) == ("oslo_policy", "policy_file"):
            continue
        assert "error" not in theirs, (section, name, theirs)
        if theirs["value"] is None:
            continue  # commented in the sample (<None>): Gantt's own default stands
        assert _value(config, section, name) == theirs["value"], (section, name)
        compared += 1
    assert compared >= 40
    # What it reads and does not use is said, once per section.
    said = [r.getMessage() for r in caplog.records if "read, not used by Gantt" in r.getMessage()]
    assert any("[scheduler] options read, not used by Gantt: discover_hosts_in_cells_interval" in m for m in said)
    assert any("sections read, not used by Gantt: api, api_database," in m for m in said)
    assert len(said) == len(set(said))


def _serve(argv: list[str], until: str, timeout: float = 60) -> tuple[int | None, str, str]:
    """Start ``gantt serve``, wait for ``until`` on its stdout (or its end), stop it: (exit status if it ended by
    itself, stdout, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "gantt", "serve", "--port", "0", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out = []
    ended = None
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                ended = proc.wait(timeout=30)
                break
            out.append(line)
            if until in line:
                time.sleep(1.0)  # the workers' own start-up logs, if any, come now
                break
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    err = proc.stderr.read()  # type: ignore[union-attr]
    return ended, "".join(out), err


def test_gantt_serve_starts_with_the_sample_and_lists_what_it_does_not_use_once(sample: Path,
                                                                                 tmp_path: Path) -> None:
    ended, out, err = _serve(["--config", str(sample), "--store", f"sqlite:///{tmp_path}/g.sqlite", "--workers", "2",
                              "--log-level", "info"], until="serving")
    assert ended is None, out + err
    assert "serving" in out
    assert err.count("[scheduler] options read, not used by Gantt: discover_hosts_in_cells_interval") == 1, err
    assert err.count("sections read, not used by Gantt:") == 1


def test_the_install_guides_discover_hosts_interval_and_oslo_booleans_start_it(tmp_path: Path) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[DEFAULT]\ntransport_url = rabbit://openstack:x@controller\n"
                    "[scheduler]\ndiscover_hosts_in_cells_interval = 300\n"
                    "[filter_scheduler]\nshuffle_best_same_weighed_hosts = yes\n"
                    "[metrics]\nrequired = off\n")
    ended, out, err = _serve(["--config", str(conf), "--store", "memory://"], until="serving")
    assert ended is None, out + err
    config = load_config(conf)
    assert config.filter_scheduler.shuffle_best_same_weighed_hosts is True
    assert config.metrics.required is False


# ------------------------------------------------------------------ spellings, against oslo.config itself


def _spell(kind: str, value: Any, rng: random.Random) -> str:
    """One of the ways oslo.config takes ``value`` of its type ``kind``."""
    if kind == "Boolean":
        word = rng.choice(("true", "1", "on", "yes") if value else ("false", "0", "off", "no"))
        return "".join(c.upper() if rng.random() < 0.5 else c for c in word)
    if kind == "Integer":
        return rng.choice([str(value), f" {value} ", f"+{value}" if value >= 0 else str(value), f"{value:_}",
                           f"00{value}" if value >= 0 else str(value), f"{value}\t"])
    if kind == "Float":
        return rng.choice([repr(value), f"{value:e}", f" {value} ", f"+{value}" if value >= 0 else repr(value),
                           f"{value:.1f}" if value == round(value, 1) else repr(value),
                           str(int(value)) if value == int(value) else repr(value)])
    if kind == "List":
        items = [f"{' ' * rng.randint(0, 2)}{item}{' ' * rng.randint(0, 2)}" for item in value]
        return ",".join(items) + ("," if items and rng.random() < 0.3 else "")
    if kind == "String":
        return rng.choice([value, f'"{value}"', f"'{value}'"]) if value else value
    raise AssertionError(kind)


def _generated(rng: random.Random, kind: str, default: Any, name: str) -> Any:
    """A value Gantt and Nova both take for the option (within Nova's bounds and Gantt's checks)."""
    if kind == "Boolean":
        return rng.random() < 0.5
    if kind == "Integer":
        base = default if isinstance(default, int) and default > 0 else 1
        return base + rng.randint(0, 5)
    if kind == "Float":
        if name in ("soft_affinity_weight_multiplier", "soft_anti_affinity_weight_multiplier",
                    "pci_weight_multiplier") or "allocation_ratio" in name:
            return rng.choice([0.5, 1.0, 2.0, 16.0, 1.25])
        return rng.choice([-2.5, -1.0, 0.0, 0.5, 1.0, 3.0, 1000000.0, 1e-3])
    if kind == "List":
        return list(default or [])
    if kind == "String":
        if name == "image_properties_default_architecture":  # one of Nova's architectures (a choice)
            return rng.choice(["x86_64", "aarch64", "ppc64le"])
        return default if default is not None else rng.choice(["aggregate_ns", "zone-b"])
    raise AssertionError(kind)


# Refused unless at Nova's default (they would change placements): spelled differently, kept at the default.
_AT_DEFAULT = {("filter_scheduler", "image_props_weight_multiplier"),
               ("scheduler", "max_placement_results"), ("scheduler", "query_placement_for_routed_network_aggregates"),
               ("oslo_policy", "policy_default_rule"), ("oslo_policy", "policy_dirs")}
_SKIP = {("oslo_policy", "policy_file"), ("cors", "allowed_origin")}  # a file to read; Nova's default is None


@pytest.fixture(scope="module")
def types(sample: Path) -> dict[str, Any]:
    return _reference(sample, _gantt_options())


@pytest.mark.parametrize("seed", range(4))
def test_generated_spellings_read_as_oslo_config_reads_them(seed: int, types: dict[str, Any],
                                                            tmp_path: Path) -> None:
    rng = random.Random(seed)
    lines: dict[str, list[str]] = {}
    for section, name in _gantt_options():
        info = types[f"{section}.{name}"]
        if info.get("unknown") or (section, name) in _SKIP or info.get("multi"):
            continue
        kind = info["type"]
        value = info["default"] if (section, name) in _AT_DEFAULT else _generated(rng, kind, info["default"], name)
        if kind == "Integer" and value is None:
            value = rng.randint(1, 4)
        lines.setdefault(section, []).append(f"{name} {rng.choice(['=', ' = ', ':', ': '])}{_spell(kind, value, rng)}")
    conf = tmp_path / "nova.conf"
    conf.write_text("".join(f"[{section}]\n" + "\n".join(body) + "\n\n" for section, body in lines.items()))
    config = load_config(conf)
    reference = _reference(conf, _gantt_options())
    compared = 0
    for section, name in _gantt_options():
        theirs = reference[f"{section}.{name}"]
        if theirs.get("unknown") or (section, name) in _SKIP or theirs.get("multi"):
            continue
        assert "error" not in theirs, (section, name, theirs, conf.read_text())
        assert _value(config, section, name) == theirs["value"], (section, name, conf.read_text())
        compared += 1
    assert compared >= 40


REFUSED = [  # one option each, so that one file holds them all for oslo.config (it refuses each on reading it)
    ("filter_scheduler", "shuffle_best_same_weighed_hosts", "maybe"),
    ("filter_scheduler", "restrict_isolated_hosts_to_isolated_images", "y"),
    ("metrics", "required", "2"),
    ("filter_scheduler", "host_subset_size", "1.5"),
    ("filter_scheduler", "max_io_ops_per_host", "0x10"),
    ("scheduler", "max_attempts", "three"),
    ("filter_scheduler", "ram_weight_multiplier", "1,5"),
    ("DEFAULT", "service_down_time", "60s"),
    ("metrics", "weight_multiplier", "one"),
    ("filter_scheduler", "image_properties_default_architecture", "zone-b"),
]


def test_what_oslo_config_refuses_is_refused_naming_the_option(tmp_path: Path) -> None:
    every = tmp_path / "every.conf"
    sections: dict[str, list[str]] = {}
    for section, name, raw in REFUSED:
        sections.setdefault(section, []).append(f"{name} = {raw}")
    every.write_text("".join(f"[{section}]\n" + "\n".join(body) + "\n" for section, body in sections.items()))
    reference = _reference(every, [(section, name) for section, name, _ in REFUSED])
    for section, name, raw in REFUSED:
        assert "error" in reference[f"{section}.{name}"], (section, name, raw)
        conf = tmp_path / f"{name}.conf"
        conf.write_text(f"[{section}]\n{name} = {raw}\n")
        with pytest.raises(InvalidRequest) as err:
            load_config(conf)
        assert f"[{section}] {name}" in err.value.message or f"{name}" in err.value.message, err.value.message


def test_a_nova_option_that_would_change_placements_stays_refused(tmp_path: Path) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[scheduler]\nmax_placement_results = 50\n")
    with pytest.raises(InvalidRequest, match=r"\[scheduler\] max_placement_results = 50 would change decisions"):
        load_config(conf)
    conf.write_text("[filter_scheduler]\nimage_props_weight_multiplier = 2.0\n")
    with pytest.raises(InvalidRequest, match=r"\[filter_scheduler\] image_props_weight_multiplier"):
        load_config(conf)


def test_a_typo_in_a_placement_section_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[filter_scheduler]\nhost_subset_sise = 2\n")
    with pytest.raises(InvalidRequest, match=r"\[filter_scheduler\] host_subset_sise .*did you mean host_subset_size"):
        load_config(conf)


# The pieces such values are made of: digits, signs, exponents, separators, spaces, the boolean words, quotes.
_PIECES = {
    "bool": ["true", "false", "TRUE", "Yes", "no", "On", "off", "1", "0", "t", "y", " ", "2", "ye", "nO", "oFf"],
    "int": ["1", "0", "42", "-", "+", " ", "_", "00", "9", ".", "e", "x", "1_0", "\t", "٣"],
    "float": ["1", "0", ".", "-", "+", "e", "E", "5", " ", "_", "inf", "nan", "1e3", ",", "Infinity"],
    "list": ["a", "b", ",", " ", ",,", "'x'", '"y"', "c d", ":", "\t"],
    "dict": ["a", "b", ":", ",", " ", "k:v", "x", "::", ",,", "'q'"],
}


def test_each_spelling_converts_as_oslo_configs_own_types() -> None:
    """novaconf's conversions against oslo.config's types themselves, on generated text (valid and not)."""
    rng = random.Random(34)
    cases = [(kind, "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))))
             for kind, pieces in _PIECES.items() for _ in range(300)]
    cases += [(kind, piece) for kind, pieces in _PIECES.items() for piece in pieces]
    theirs = run_json(nova_python(), TYPES_DRIVER, cases, timeout=300)
    convert = {"bool": novaconf.oslo_bool, "int": novaconf.oslo_int, "float": novaconf.oslo_float,
               "list": novaconf.oslo_list, "dict": novaconf.oslo_dict}
    for (kind, text), answer in zip(cases, theirs, strict=True):
        try:
            ours: Any = convert[kind](text)
        except ValueError:
            assert answer == {"error": True}, (kind, text, answer)
            continue
        assert "error" not in answer, (kind, text, ours)
        assert (repr(ours) if isinstance(ours, float) else ours) == answer["value"], (kind, text)
