"""The lab's argparse parser class: how every command and subcommand parses and speaks.

One class for the top level and every subparser (argparse builds subparsers with the parent's
class), so each habit holds everywhere at once:
- the program is named as the user ran it: `tuning-lab`, or `python -m tuning` run as a module;
- no prefix matching (`--exp` is not `--experiment`): a flag is typed whole or refused;
- a mistyped command, flag or value gets a did-you-mean from the names the parser knows;
- help shows each flag's default (unless its help already says it, or there is none to show);
- hidden things (help=argparse.SUPPRESS, a command added without help) are never suggested;
- a flag's old name (`rename_flag`) still works, hidden from help, with one line on stderr saying
  its new name, so no script breaks.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# What the lab's console command is called (pyproject.toml [project.scripts]).
CONSOLE_NAME = "tuning-lab"
MODULE_NAME = "python -m tuning"


def prog_name(argv0: str | None = None) -> str:
    """How the user started the CLI: `python -m tuning` when run as a module (argv[0] is the
    package's __main__.py), else `tuning-lab` (the console command, and the name the docs use)."""
    first = sys.argv[0] if argv0 is None else argv0
    base = os.path.basename(first or "")
    if base in ("__main__.py", "-m") or first == "-m":
        return MODULE_NAME
    return CONSOLE_NAME


class DefaultsFormatter(argparse.HelpFormatter):
    """argparse's help, with `(default: X)` after each flag that has a default worth saying: not
    None, not False (a switch that is off), not an empty list, and not when the help already names
    its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            action.help is argparse.SUPPRESS
            or not action.option_strings
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
            or isinstance(action, argparse._StoreConstAction)
            or "default" in text.lower()
        ):
            return action.help
        return f"{text} (default: %(default)s)".strip()


def rename_flag(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Keep `old` working on parser as a hidden alias of its flag `new` (one idea, one name); a
    plain argparse parser (a test's) knows only the new name."""
    if isinstance(parser, LabParser):
        parser.renamed[old] = new


def new_names(args: list[str], renamed: dict[str, str]) -> list[str]:
    """args with each old flag name (`--slo`, `--slo=...`) written as its new one, and one line
    on stderr per old name used ("--slo is now --goodput"); nothing after `--` is touched."""
    out = list(args)
    told: set[str] = set()
    for i, word in enumerate(args):
        if word == "--":
            break
        old, eq, value = word.partition("=")
        new = renamed.get(old)
        if new is None:
            continue
        out[i] = f"{new}{eq}{value}"
        if old not in told:
            told.add(old)
            from tuning.cli.args import say  # the CLI's one way to print

            say(f"{old} is now {new}", file=sys.stderr)
    return out


def _close(word: str, names: Sequence[str]) -> list[str]:
    """Names that start with word (`--exp` -> `--experiment`: the prefix argparse no longer
    completes), else those difflib finds close (`rnus` -> `runs`); at most three."""
    found = [n for n in names if len(word.strip("-")) >= 2 and n.startswith(word) and n != word]
    return (found or difflib.get_close_matches(word, list(names), n=3, cutoff=0.6))[:3]


def did_you_mean(word: str, names: Sequence[str]) -> str:
    """`; did you mean 'runs'?` (or `... 'a' or 'b'?`) for the names close to word, else ''."""
    found = _close(word, names)
    if not found:
        return ""
    return "; did you mean " + " or ".join(repr(f) for f in found) + "?"


def visible_commands(action: argparse._SubParsersAction) -> list[str]:
    """The commands help lists (those added with help=...); hidden ones are left out."""
    return [a.dest for a in action._choices_actions]


def visible_flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of parser that help shows (hidden flags are never suggested)."""
    return [
        name
        for action in parser._actions
        if action.help is not argparse.SUPPRESS
        for name in action.option_strings
    ]


class LabParser(argparse.ArgumentParser):
    """ArgumentParser with the lab's habits (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)
        # (title, command names): help lists the commands under these headings, in this order
        self.command_groups: list[tuple[str, list[str]]] = []
        # old flag name -> its new name (rename_flag): read as the new one, never in help
        self.renamed: dict[str, str] = {}

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse, with this command's old flag names read as their new ones (argparse
        hands each subcommand its own arguments through here)."""
        if self.renamed:
            args = new_names(sys.argv[1:] if args is None else list(args), self.renamed)
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        """argparse's help; with command_groups, the commands listed by group (a command no
        group names comes last, under "other commands"; hidden ones never)."""
        sub = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if not self.command_groups or sub is None:
            return super().format_help()
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        shown = {a.dest: a for a in sub._choices_actions}
        grouped = [n for _, names in self.command_groups for n in names]
        groups = [*self.command_groups, ("other commands", [n for n in shown if n not in grouped])]
        for title, names in groups:
            if not any(n in shown for n in names):
                continue
            formatter.start_section(title)
            formatter.add_arguments([shown[n] for n in names if n in shown])
            formatter.end_section()
        formatter.start_section("options")
        formatter.add_arguments([a for a in self._actions if a.option_strings])
        formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A value outside the choices (a command, a subcommand, a --dataset-format): refused with
        the close ones named."""
        choices = action.choices
        if choices is None or value in choices:
            return
        if isinstance(action, argparse._SubParsersAction):
            names: list[str] = visible_commands(action)
            shown = ", ".join(names)
        else:
            names = [str(c) for c in choices]
            shown = ", ".join(repr(c) for c in choices)
        hint = did_you_mean(str(value), names)
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}{hint or f' (choose from {shown})'}"
        )

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse, but an unrecognized flag is named by the command it was given to, with
        the flags of that command that come close (`--exp` -> `--experiment`)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            deepest = self.chosen_parser(parsed)
            hints = [
                did_you_mean(word.split("=", 1)[0], visible_flags(deepest))
                for word in extras
                if word.startswith("-")
            ]
            hint = next((h for h in hints if h), "")
            deepest.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def chosen_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The (sub)parser of the command the user chose: `server start`'s, not the top level's."""
        parser: argparse.ArgumentParser = self
        while True:
            sub = next(
                (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
            )
            chosen = getattr(parsed, sub.dest, None) if sub is not None else None
            if sub is None or chosen not in sub.choices:
                return parser
            parser = sub.choices[chosen]

    def error(self, message: str) -> NoReturn:
        """A usage error: the usage line and one message on stderr, exit 2 (argparse's code)."""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")
