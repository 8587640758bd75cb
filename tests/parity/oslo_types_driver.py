"""Runs under the reference virtualenv (oslo.config as Nova 34 pins it), never imports gantt: converts each
``[type, text]`` of the JSON list on stdin with oslo.config's own types (Boolean, Integer, Float, List of String,
Dict of String) and writes ``{"value": ...}`` (floats as repr) or ``{"error": true}`` for each, as a JSON list."""

from __future__ import annotations

import json
import sys

from oslo_config import types

TYPES = {"bool": types.Boolean(), "int": types.Integer(), "float": types.Float(), "list": types.List(),
         "dict": types.Dict()}


def main() -> None:
    out = []
    for kind, text in json.load(sys.stdin):
        try:
            value = TYPES[kind](text)
        except ValueError:
            out.append({"error": True})
            continue
        out.append({"value": repr(value) if isinstance(value, float) else value})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
