"""``pyscheduler run`` (and this package's other commands) skip loading the command packages;
help and their own commands still find them."""

from __future__ import annotations

import pytest

from pyscheduler.cli import BUILTIN_COMMANDS, _command, build_parser, parse_command_line


@pytest.mark.parametrize(("argv", "command"), [
    pytest.param(["run", "--config", "x"], "run", id="command first"),
    pytest.param(["--log-level", "debug", "run"], "run", id="after an option and its value"),
    pytest.param(["--log-format=json", "sim", "up"], "sim", id="after an option=value"),
    pytest.param(["--help"], None, id="help alone"),
    pytest.param([], None, id="nothing"),
])
def test_command_is_the_first_word_that_is_not_an_option(argv: list[str],
                                                         command: str | None) -> None:
    assert _command(argv) == command


def test_builtin_commands_parse_without_the_command_packages() -> None:
    parser = build_parser(plugins=False)
    args = parser.parse_args(["run", "--log-level", "warning", "--config", "c.yaml"])
    assert args.config == "c.yaml" and args.log_level == "warning"
    assert {"run", "config", "fragment", "version"} == BUILTIN_COMMANDS
    assert parser.parse_args(["config", "check", "k.yaml"]).file == "k.yaml"


@pytest.mark.parametrize(("argv", "level", "fmt"), [
    pytest.param(["--log-level", "debug", "run"], "debug", "auto", id="before the command"),
    pytest.param(["run", "--log-level", "error"], "error", "auto", id="after the command"),
    pytest.param(["--log-level", "debug", "run", "--log-level", "error"], "error", "auto",
                 id="both: the later wins"),
    pytest.param(["--log-format", "json", "fragment", "list"], None, "json",
                 id="format before a nested command"),
    pytest.param(["run"], None, "auto", id="neither: the configuration's level"),
])
def test_logging_options_count_before_or_after_the_command(argv: list[str], level: str | None,
                                                           fmt: str) -> None:
    args = parse_command_line(argv)
    assert (args.log_level, args.log_format) == (level, fmt)
