"""A ``--config`` file read safely: UTF-8 text (one line naming the file and the first byte that
is not, instead of a decoder's traceback) holding plain YAML values (a tag such as
``!!python/object`` is refused, nothing runs)."""

from __future__ import annotations

import os


def read_config_file(path: str | os.PathLike) -> object:
    """The YAML document of the ``--config`` file ``path``.

    Raises:
        ValueError: naming the file and where it is wrong, in one line: a byte that is not
            UTF-8 (line, column, the byte), or YAML that is not valid (line, column, why).
    """
    import yaml

    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        before = data[:err.start]
        line, column = before.count(b"\n") + 1, err.start - (before.rfind(b"\n") + 1) + 1
        raise ValueError(f"--config {path} is not UTF-8 text: byte 0x{data[err.start]:02x} at "
                         f"line {line}, column {column}; save it as UTF-8") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ValueError(f"--config {path} is not valid YAML{where}: "
                         f"{' '.join(str(problem).split())}") from None
