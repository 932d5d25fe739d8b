"""The project's ``kedro run``: ``--params`` carries lists, ``--config`` carries dotted keys."""

from __future__ import annotations

import click
import pytest

from ih_kedro.cli import cli, expand_dotted_keys, run, split_params, split_top_level


def _parse(value):
    return split_params(click.Context(run), None, value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("law_fit.training.seeds=[0,1,2]", {"law_fit": {"training": {"seeds": [0, 1, 2]}}}),
        ("a.b=[0, 1],a.c=3", {"a": {"b": [0, 1], "c": 3}}),
        ("markov.vocabulary.compact=false", {"markov": {"vocabulary": {"compact": False}}}),
        ("a={p: 1, q: [2,3]}, b='x,y'", {"a": {"p": 1, "q": [2, 3]}, "b": "x,y"}),
        ("telemetry.external_checkpoints=/p/O'Neil,x=1",
         {"telemetry": {"external_checkpoints": "/p/O'Neil"}, "x": 1}),
        ("", {}),
    ],
)  # fmt: skip
def test_params_split_only_on_top_level_commas(value, expected):
    assert _parse(value) == expected


def test_an_item_without_a_value_is_a_usage_error():
    with pytest.raises(click.UsageError, match=r"item `a=\[0,1` is not YAML"):
        _parse("a=[0,1")  # an unclosed bracket swallows the rest: one item
    with pytest.raises(click.UsageError, match="item `b` must be `key=value`"):
        _parse("a=1,b")


def test_split_top_level_keeps_nested_commas():
    assert split_top_level("a=[0,(1,2)],b={c: [3,4]},,") == ["a=[0,(1,2)]", "b={c: [3,4]}"]


def test_config_file_params_have_dotted_keys_expanded():
    """``kedro run --config run.yml`` hands ``run.params`` over as a mapping: dotted keys are
    nested (Kedro kept them as top-level names that no node reads)."""
    params = {
        "law_fit.training.max_steps": 3000,
        "law_fit": {"training": {"seeds": [0, 1]}, "telemetry.batch_size": 4},
        "x": 1,
    }
    assert _parse(params) == {
        "law_fit": {
            "training": {"max_steps": 3000, "seeds": [0, 1]},
            "telemetry": {"batch_size": 4},
        },
        "x": 1,
    }
    assert expand_dotted_keys({"a.b": 1, "a.b.c": 2}) == {"a": {"b": {"c": 2}}}  # later wins


def test_the_project_cli_replaces_kedros_run_and_keeps_its_other_options():
    from kedro.framework.cli.project import run as kedro_run

    assert cli.get_command(click.Context(cli), "run") is run
    assert [p.name for p in run.params] == [p.name for p in kedro_run.params]
    option = next(p for p in run.params if p.name == "params")
    assert option.callback is split_params
    assert next(p for p in kedro_run.params if p.name == "params").callback is not split_params
