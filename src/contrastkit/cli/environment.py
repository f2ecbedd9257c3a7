"""An installation that breaks every command, said in one line: a torchvision built for another
torch than the one installed (a plain ``pip install timm`` beside a CPU torch from PyTorch's
index brings PyPI's torchvision, built for PyPI's CUDA torch). contrastkit never imports
torchvision, but Lightning's torchmetrics does when it is installed, and its import then fails
(``operator torchvision::nms does not exist``) in a 40-line traceback.

The failure is recognised by where it was raised (a frame of torchvision's package), not
guessed from version numbers, so a working pair of any build is never refused; the versions
only make the advice.
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from types import TracebackType

#: torch 2.N is built with torchvision 0.(N + 15), the same patch release since torch 2.1
#: (2.13.0: 0.28.0; 2.0.1 went with 0.15.2).
_TORCHVISION_MINOR_OFFSET = 15
_PYTORCH_INDEX = "https://download.pytorch.org/whl/"


def torchvision_mismatch(err: BaseException) -> str | None:
    """One line on ``err`` when it is torchvision failing to import (raised inside its package,
    or about its operators): what failed, the installed versions and how to install the
    matching pair; None for any other error."""
    if not any(_raised_in_torchvision(e) for e in _chain(err)):
        return None
    torch, torchvision = _version("torch"), _version("torchvision")
    first = " ".join(str(err).split()) or type(err).__name__
    return (f"torchvision {torchvision} does not import beside torch {torch} ({first}); "
            f"contrastkit does not use it: pip uninstall torchvision, or, where another package "
            f"needs it (timm), install the one built for this torch: "
            f"{matching_torchvision(torch)}")


def matching_torchvision(torch: str) -> str:
    """The command that installs the torchvision built for the torch version ``torch`` (the
    release of the same minor and patch; from PyTorch's index of the same build, such as
    ``+cpu``)."""
    match = re.fullmatch(r"2\.(\d+)\.(\d+)(?:\+([\w.]+))?", torch)
    if match is None or match.group(1) == "0":
        return (f"the release listed for torch {torch} at "
                "https://pytorch.org/get-started/previous-versions/")
    minor, patch, build = match.groups()
    index = f" --index-url {_PYTORCH_INDEX}{build}" if build else ""
    return f"pip install torchvision==0.{int(minor) + _TORCHVISION_MINOR_OFFSET}.{patch}{index}"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _chain(err: BaseException) -> list[BaseException]:
    """``err`` and the errors it was raised from or during."""
    seen: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _raised_in_torchvision(err: BaseException) -> bool:
    if "torchvision::" in str(err):
        return True
    inside = f"{os.sep}torchvision{os.sep}"
    trace: TracebackType | None = err.__traceback__
    while trace is not None:
        if inside in trace.tb_frame.f_code.co_filename:
            return True
        trace = trace.tb_next
    return False
