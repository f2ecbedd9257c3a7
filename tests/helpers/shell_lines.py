"""The commands of the documentation's ``bash`` blocks, read as a shell reads them, so that a
test runs them as written: lines joined at a trailing backslash, comments dropped,
``NAME=value`` assignments kept and ``$NAME`` / ``${NAME}`` expanded (unquoted: split into
words), ``source .venv/bin/activate`` noted."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

ACTIVATE = "source .venv/bin/activate"
_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)=(.*)$")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass
class Block:
    """One ``bash`` block: its lines (continuations joined, comments dropped)."""

    lines: list[str]

    @property
    def commands(self) -> list[list[str]]:
        """Each ``contrastkit`` command's arguments (after ``contrastkit``), variables
        expanded as the shell would, in order."""
        variables: dict[str, str] = {}
        found = []
        for line in self.lines:
            assignment = _ASSIGNMENT.match(line)
            if assignment:
                variables[assignment.group(1)] = " ".join(shlex.split(assignment.group(2)))
                continue
            expanded = _VARIABLE.sub(lambda m: variables[m.group(1) or m.group(2)], line)
            words = shlex.split(expanded)
            if words and words[0] == "contrastkit":
                found.append(words[1:])
        return found

    @property
    def activates_first(self) -> bool:
        """Whether ``source .venv/bin/activate`` comes before the first ``contrastkit`` line."""
        for line in self.lines:
            if line == ACTIVATE:
                return True
            if line.startswith("contrastkit "):
                return False
        return True


def bash_blocks(markdown: str) -> list[Block]:
    """The ``bash`` code blocks of ``markdown`` that run ``contrastkit``."""
    blocks = []
    for body in re.findall(r"```bash\n(.*?)```", markdown, re.S):
        joined = re.sub(r"\\\n\s*", " ", body)
        lines = [line for line in map(_without_comment, joined.splitlines()) if line]
        if any(line.startswith("contrastkit ") for line in lines):
            blocks.append(Block(lines))
    return blocks


def _without_comment(line: str) -> str:
    """``line`` without a comment (``#`` at a word's start, outside quotes), stripped."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip()
    return line.strip()
