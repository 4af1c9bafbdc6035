"""The CLI reference of the documentation, made from the argparse parser itself, so the
documented commands, options and meanings cannot drift from the code
(`python -m kiwb.cli_reference` prints it; the docs build puts it in its page)."""

from __future__ import annotations

import argparse

USAGE_WIDTH = 88  # columns of the usage blocks, whatever the terminal that builds the docs


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order `kiwb --help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = "" if action.nargs == 0 else " " + (action.metavar or action.dest.upper())
    return ", ".join(f"`{option}{metavar}`" for option in action.option_strings)


def _meaning(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    text = formatter._expand_help(action) if action.help else ""
    if action.choices and "," not in text:  # a help that lists its choices already has commas
        text += f" (one of: {', '.join(map(str, action.choices))})"
    return text.replace("|", "\\|").replace("\n", " ")


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a reader is told about: every one but --help and hidden ones."""
    return [action for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
            and action.help != argparse.SUPPRESS]


def _command(name: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    formatter = parser._get_formatter()
    lines = [f"{'#' * level} `kiwb {name}`", "", summary[:1].upper() + summary[1:] + ".", "",
             "```text", _usage(parser), "```", ""]
    rows = [f"| {_argument(action)} | {_meaning(action, formatter)} |"
            for action in documented_actions(parser)]
    if rows:
        lines += ["| argument | meaning |", "|---|---|", *rows, ""]
    for sub_name, sub_summary, sub in _subcommands(parser):
        lines += _command(f"{name} {sub_name}", sub_summary, sub, level + 1)
    return lines


def reference_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """One section per subcommand (nested ones beneath): what it does, its usage, and a table
    of its arguments with their help."""
    if parser is None:
        from kiwb.cli import build_parser

        parser = build_parser()
    lines = []
    for name, summary, sub in _subcommands(parser):
        lines += _command(name, summary, sub, level=2)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
