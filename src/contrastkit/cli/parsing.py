"""The argument parser of the ``contrastkit`` commands (all but ``pretrain``, whose parser is
LightningCLI's): an error is one line, ``PROG: error: ...``, and a mistyped option or
sub-command names the closest valid ones ("did you mean"), as ``pretrain`` does; plus the
``--threads`` option of every command that computes.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable, Sequence

_UNRECOGNIZED = "unrecognized arguments: "
_REQUIRED = "the following arguments are required: "
_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean A or B?"`` for the candidates closest to ``word`` (``""`` for none)."""
    close = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line (no usage text) and say which
    option or sub-command was meant; an unknown option is reported by the sub-command it was
    given to, against that sub-command's options."""

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._chosen(parsed).error(_UNRECOGNIZED + " ".join(extras))
        return parsed

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None):
        """argparse's, keeping the arguments given (a sub-command's parser gets its own), so
        that a missing required option can be blamed on a mistyped one."""
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _chosen(self, parsed: argparse.Namespace) -> CommandParser:
        """The (sub-)parser that parsed the chosen sub-command's options."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(sub, CommandParser):
                    return sub._chosen(parsed)
        return self

    def error(self, message: str):  # type: ignore[override]
        """Print ``PROG: error: message`` on one line, with the closest valid names of an
        unknown option or choice, and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {self.explain(message)}\n")

    def explain(self, message: str) -> str:
        """``message`` with its "did you mean" and where the valid names are listed; a missing
        required option is blamed on the first unknown option given (``--checkpint``)."""
        if message.startswith(_REQUIRED):
            unknown = [a for a in getattr(self, "_given", []) if a.startswith("--")
                       and a.split("=", 1)[0] not in self._option_string_actions]
            if unknown:
                message = _UNRECOGNIZED + " ".join(unknown)
        if message.startswith(_UNRECOGNIZED):
            wrong = message[len(_UNRECOGNIZED):].split()
            first = next((w for w in wrong if w.startswith("-")), wrong[0])
            if not first.startswith("-"):
                return (f"unexpected argument {first!r} (options start with --; "
                        f"{self.prog} --help lists them)")
            name = first.split("=", 1)[0]
            options = [o for o in self._option_string_actions if o.startswith("--")]
            return (f"{name} is not an option of {self.prog}{did_you_mean(name, options)} "
                    f"({self.prog} --help lists them)")
        choice = _CHOICE.search(message)
        if choice:
            names = re.findall(r"'([^']*)'", choice.group(2))
            return f"{' '.join(message.split())}{did_you_mean(choice.group(1), names)}"
        return " ".join(message.split())


#: The help of ``--threads`` (the dispatcher :func:`contrastkit.cli.main.main` applies it).
THREADS_HELP = ("CPU threads per operator, for torch, faiss and t-SNE (default: auto, "
                "OMP_NUM_THREADS when set, else the cores this process may use); waiting "
                "threads sleep instead of spinning")


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--threads N|auto`` to ``parser``'s help (:mod:`contrastkit.threads`)."""
    parser.add_argument("--threads", default="auto", metavar="N|auto", help=THREADS_HELP)
