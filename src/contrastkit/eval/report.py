"""Writing and reading evaluation outputs: ``results.json``, ``results.md``, ``predictions.npz``.

Every file is written atomically (temporary file in the same folder, then ``os.replace``).
An evaluation folder written by ``contrastkit eval`` holds:

* ``results.json``: ``{"command", "argv", "checkpoint": {"path", "sha256", "backbone"},
  "data": {...}, "protocol", "config": {...}, "metrics": {...}, "figures": [...], ...}``;
* ``results.md``: the same numbers as a Markdown table;
* ``predictions.npz``: ``pred`` and ``labels`` (int64, one per test sample; zip-compressed:
  10,000 predictions of 10 classes take about 7 KB instead of 160), read back by
  ``contrastkit compare`` for the paired bootstrap.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from contrastkit.outputs import write_bytes_atomic

__all__ = [
    "flatten_metrics",
    "format_signed",
    "format_value",
    "load_run",
    "markdown_table",
    "metrics_markdown",
    "write_json",
    "write_predictions",
    "write_text",
]

RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
PREDICTIONS = "predictions.npz"


def _jsonable(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def write_json(path: str | os.PathLike, data: Mapping[str, object]) -> Path:
    """Write ``data`` as indented JSON (tensors and numpy values become lists/numbers)."""
    text = json.dumps(data, indent=2, default=_jsonable, allow_nan=True)
    return write_bytes_atomic(path, (text + "\n").encode())


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8)."""
    return write_bytes_atomic(path, text.encode())


def write_predictions(path: str | os.PathLike, pred: object, labels: object,
                      **extra: object) -> Path:
    """Write ``pred`` and ``labels`` (int64 arrays of equal length) and ``extra`` arrays.

    Raises:
        ValueError: when ``pred`` and ``labels`` differ in length.
    """
    arrays = {"pred": _int_array(pred), "labels": _int_array(labels)}
    if arrays["pred"].shape != arrays["labels"].shape:
        raise ValueError(f"pred has shape {arrays['pred'].shape} but labels has "
                         f"{arrays['labels'].shape}")
    for key, value in extra.items():
        arrays[key] = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else \
            np.asarray(value)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return write_bytes_atomic(path, buffer.getvalue())


def _int_array(x: object) -> np.ndarray:
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return arr.astype(np.int64).reshape(-1)


def load_run(folder: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read ``results.json`` and ``predictions.npz`` of an evaluation folder.

    Raises:
        FileNotFoundError: when the folder or one of the two files is missing.
        ValueError: when a file cannot be parsed or lacks ``pred``/``labels``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"evaluation folder {folder} does not exist")
    for name in (RESULTS_JSON, PREDICTIONS):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} does not exist (run `contrastkit eval "
                                    f"... --output {folder}` first)")
    try:
        results = json.loads((folder / RESULTS_JSON).read_text())
        with np.load(folder / PREDICTIONS, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read the evaluation in {folder}: {err}") from err
    if "pred" not in arrays or "labels" not in arrays:
        raise ValueError(f"{folder / PREDICTIONS} lacks the 'pred' and 'labels' arrays")
    return results, arrays


def flatten_metrics(metrics: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``; lists of numbers are kept as lists."""
    flat: dict[str, object] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_metrics(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def format_value(value: object, digits: int = 4) -> str:
    """Numbers with ``digits`` decimals, lists as ``[a, b]``, None as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v, digits) for v in value) + "]"
    return str(value)


def format_signed(value: float, decimals: int = 1) -> str:
    """A difference with its sign readable: ``+1.2``, ``-0.4``; a nonzero value that would round
    to a signed zero at ``decimals`` gets the decimals its first nonzero digit needs, up to 3
    more (``-0.0125`` -> ``-0.01``, never ``-0.0``), then one significant digit in exponent form
    (``-6e-07``); an exact zero is ``0``."""
    if value == 0 or math.isnan(value):
        return "0" if value == 0 else "nan"
    for places in range(decimals, decimals + 4):
        text = f"{value:+.{places}f}"
        if not math.isfinite(value) or float(text) != 0:
            return text
    return f"{value:+.0e}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table: ``| h1 | h2 |``, separator, one line per row (values formatted)."""
    cells = [[str(h) for h in header]] + [[format_value(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
             for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines) + "\n"


def metrics_markdown(title: str, metrics: Mapping[str, object],
                     context: Mapping[str, object] | None = None,
                     references: Mapping[str, str] | None = None) -> str:
    """``# title``, an optional context table (checkpoint, data, options), the metrics table;
    with ``references`` (``{metric: text}``) the table gets a "paper reference" column (``-``
    for the metrics without one)."""
    parts = [f"# {title}\n"]
    if context:
        parts.append(markdown_table(["setting", "value"], list(context.items())))
    flat = flatten_metrics(metrics)
    if references is None:
        parts.append(markdown_table(["metric", "value"], list(flat.items())))
    else:
        rows = [[name, value, references.get(name)] for name, value in flat.items()]
        parts.append(markdown_table(["metric", "value", "paper reference"], rows))
    return "\n".join(parts)
