"""``kedro run`` with parameter overrides that carry lists and dotted keys.

Kedro's own ``run`` (1.7) splits ``--params`` on every comma, so
``--params="law_fit.training.seeds=[0,1,2]"`` stops with "Item `1]` must contain a key and a
value" (kedro-org/kedro#2552), and it passes the ``params`` of a ``--config`` file through as
they are, so a dotted key there (``law_fit.training.max_steps: 3000``) became a new top-level
parameter that nothing reads. This module is the project's ``cli.py`` (Kedro loads it over its
built-in commands, and ``python -m ih_kedro`` finds it too): the same ``run`` command whose
``--params`` splits only on the commas outside brackets, braces and quotes, and whose ``--config``
params have dotted keys expanded into the nested form. Everything else is Kedro's command.

Unknown keys are refused by :class:`ih_kedro.hooks.ParameterOverrideHooks` before any node runs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import click
from kedro.framework.cli.project import run as kedro_run
from omegaconf import OmegaConf

_OPENING = {"[": "]", "{": "}", "(": ")"}


def split_top_level(text: str) -> list[str]:
    """``text`` split on the commas outside brackets, braces, parentheses and quotes, stripped,
    empty items dropped (``"a=[0,1],b='x,y'"`` -> ``["a=[0,1]", "b='x,y'"]``).

    A quote opens only where a YAML value can start (after ``=``, ``[``, ``{``, ``(``, ``,`` or
    ``:``), so an apostrophe inside a word (``path=/O'Neil``) is just a character.
    """
    items: list[str] = []
    closers: list[str] = []
    quote: str | None = None
    current: list[str] = []
    previous = ","
    for char in text:
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"" and previous in "=[{(,:":
            quote = char
        elif char in _OPENING:
            closers.append(_OPENING[char])
        elif closers and char == closers[-1]:
            closers.pop()
        elif char == "," and not closers:
            items.append("".join(current))
            current = []
            previous = char
            continue
        current.append(char)
        if not char.isspace():
            previous = char
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def expand_dotted_keys(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b.c": 1, "a": {"d": 2}}`` -> ``{"a": {"b": {"c": 1}, "d": 2}}``, at every depth.

    Later keys win where two spell the same leaf; nested mappings are merged key by key.
    """
    expanded: dict[str, Any] = {}
    for key, value in params.items():
        parts = str(key).split(".")
        tree: Any = expand_dotted_keys(value) if isinstance(value, Mapping) else value
        for part in reversed(parts[1:]):
            tree = {part: tree}
        _merge_into(expanded, parts[0], tree)
    return expanded


def _merge_into(target: dict[str, Any], key: str, value: Any) -> None:
    if isinstance(value, dict) and isinstance(target.get(key), dict):
        for inner_key, inner_value in value.items():
            _merge_into(target[key], inner_key, inner_value)
    else:
        target[key] = value


def split_params(ctx: click.Context, param: Any, value: Any) -> dict[str, Any]:  # noqa: ARG001
    """The ``--params`` callback: ``key=value`` items, comma-separated outside brackets and
    quotes, each value read as YAML (``[0,1,2]`` a list, ``false`` a bool); or, from a
    ``--config`` file, a mapping whose dotted keys are expanded."""
    if isinstance(value, Mapping):
        return expand_dotted_keys(value)
    dot_list = []
    for item in split_top_level(value or ""):
        key, equals, val = item.partition("=")
        if not equals or not key.strip():
            ctx.fail(
                f"Invalid format of `--params`: item `{item}` must be `key=value` (a list: "
                '`--params="law_fit.training.seeds=[0,1,2]"`).'
            )
        try:
            OmegaConf.from_dotlist([f"{key.strip()}={val}"])
        except Exception as error:  # noqa: BLE001 - YAML and OmegaConf errors alike
            reason = str(error).splitlines()[0]
            ctx.fail(f"Invalid value in `--params`: item `{item}` is not YAML ({reason}).")
        dot_list.append(f"{key.strip()}={val}")
    if not dot_list:
        return {}
    return OmegaConf.to_container(OmegaConf.from_dotlist(dot_list))  # type: ignore[return-value]


def _with_params_callback(command: click.Command) -> click.Command:
    """A copy of ``command`` whose ``--params`` option uses :func:`split_params`."""
    command = copy.copy(command)
    options = []
    for original in command.params:
        option = original
        if original.name == "params":
            option = copy.copy(original)
            option.callback = split_params
            option.help = (
                "Parameter overrides, `key=value` separated by commas; a value is read as YAML, "
                'so lists work: --params="law_fit.training.seeds=[0,1,2],law_fit.training.'
                'max_steps=3000". A key that names no parameter stops the run.'
            )
        options.append(option)
    command.params = options
    return command


@click.group(name="ih_kedro")
def cli() -> None:
    """Project commands (they replace Kedro's built-ins of the same name)."""


run = _with_params_callback(kedro_run)
cli.add_command(run, "run")
