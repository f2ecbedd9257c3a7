"""One-line errors of the ``contrastkit`` commands.

Expected failures (bad options, files, data, checkpoints) raise ``ValueError`` or ``OSError``
with a message naming the argument, file or config key; a training loss that becomes NaN or
infinite raises ``FloatingPointError`` (``NonFiniteLossError``) naming the step. The commands
print that message on one line, ``contrastkit <command>: error: <message>``, with the
command's own option that fixes it when there is one (``--skip-corrupt`` for ``eval``,
``--data.skip_corrupt true`` for ``pretrain``, what to reduce when memory runs out), and exit
with status 2.

A run stopped by a signal (:class:`RunInterrupted`) prints one line saying how to resume and
exits with the shell's convention, 128 + the signal's number: 130 for SIGINT (Ctrl-C), 143 for
SIGTERM. A Ctrl-C before a run starts prints one line and exits with 130.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping

#: The last line of a traceback: ``package.module.ErrorName: message``.
_LAST_LINE = re.compile(r"^(?:[\w.]+\.)?\w+: (?P<message>.*)$")

EXPECTED = (ValueError, OSError, ImportError, FloatingPointError)


class RunInterrupted(Exception):
    """A run stopped by a signal; ``status`` is the exit status (128 + the signal number)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def original_message(err: BaseException) -> str:
    """The message of ``err``; for an error re-raised from a ``DataLoader`` worker (whose
    message holds the worker's traceback), the message of the original error."""
    text = str(err).strip()
    if "Original Traceback" in text:
        match = _LAST_LINE.match(text.splitlines()[-1])
        if match:
            return match.group("message")
    return text


def error_line(err: BaseException, hints: Mapping[type[BaseException], str]) -> str:
    """``err``'s message on one line, followed by the hint of the first matching type; an
    out-of-memory error keeps the first sentences of its message (what was asked, what is
    free), not torch's advice on its allocator."""
    message = " ".join(original_message(err).split())
    if _out_of_memory(err):
        message = "out of memory" + (f" ({'. '.join(message.split('. ')[:3]).rstrip('.')})"
                                     if message else "")
    for kind, hint in hints.items():
        if isinstance(err, kind):
            return f"{message}; {hint}"
    return message


def _out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` says that memory ran out: the host's (``MemoryError``) or a device's
    (``torch.OutOfMemoryError``; torch is not imported for this)."""
    torch = sys.modules.get("torch")
    out_of_memory = getattr(torch, "OutOfMemoryError", ()) if torch is not None else ()
    return isinstance(err, (MemoryError, out_of_memory))


def run_command(prog: str, body: Callable[[], int],
                hints: Mapping[type[BaseException], str] | None = None) -> int:
    """Run ``body``; an expected failure (of :data:`EXPECTED`, or of a type ``hints`` has a
    hint for: running out of memory, for one) becomes ``prog: error: message`` and status 2,
    a :class:`RunInterrupted` its one line and status."""
    hints = hints or {}
    try:
        return body()
    except RunInterrupted as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        print(f"{prog}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except (*EXPECTED, *hints) as err:
        print(f"{prog}: error: {error_line(err, hints)}", file=sys.stderr)
        return 2


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, line: str | None = None) -> str:
    return f"warning: {message}\n"


def plain_warnings() -> None:
    """Print warnings as ``warning: message`` (one line), without the source file, line
    number and the internal source line Python's default format adds."""
    import warnings

    warnings.formatwarning = _one_line_warning
