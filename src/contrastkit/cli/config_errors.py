"""One-line configuration errors of ``contrastkit pretrain``.

jsonargparse reports a bad option as a usage text of some 65 lines followed by a nested
explanation; :func:`config_error_line` turns its message into one line naming the key, the
wrong value and the closest valid keys ("did you mean"), for the parser's ``error``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import re
from collections.abc import Iterable

_KEY = re.compile(r'Parser key "([\w.]+)"')
_CLASS = re.compile(r"class_path '([\w.]+)'")
_UNKNOWN = re.compile(r"Option '(\w+)[\w.]*' is not accepted")
_GOT = re.compile(r"Expected a (.+?)\. Got value: (.*)")
_GIVEN = re.compile(r"Given value: (.*)")
_EXPECTED = re.compile(r"- Expected a (.+)")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (\S+)")
_GROUP = re.compile(r"Group '([\w.]+)' does not accept option '([\w.]+)'")
_TYPE_NAME = re.compile(r"<class '(?:[\w.]+\.)?(\w+)'>")
_SUBTYPES = re.compile(r"Subtypes: \[(.*?)\]")


def accepted_options(cls: type) -> list[str]:
    """Constructor arguments of ``cls``, following ``**kwargs`` up its base classes."""
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        params = inspect.signature(klass.__init__).parameters.values()
        names += [p.name for p in params if p.name != "self" and p.kind not in
                  (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in names]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


def _class(path: str) -> type | None:
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _is_not_finite(text: str) -> bool:
    """Whether ``text`` is a number that is not finite (``nan``, ``-inf``, ``Infinity``)."""
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def _type_name(text: str) -> str:
    name = _TYPE_NAME.sub(r"\1", text).replace("typing.", "").replace("NoneType", "null")
    literal = re.fullmatch(r"Literal\[(.*)\]", name.strip())
    return f"value, one of {literal.group(1)}" if literal else name


def config_error_line(message: str, options: Iterable[str] = ()) -> str:
    """One line for a jsonargparse error ``message``.

    Args:
        message: what jsonargparse passed to ``parser.error``.
        options: the parser's option strings (``--trainer.max_epochs``, ...), for the closest
            valid keys of an unknown one.

    Returns:
        ``KEY: ...`` naming the key, the wrong value and the closest valid keys where they
        can be found; otherwise the message with its lines joined.
    """
    options = [o for o in options if o.startswith("--")]
    keys = _KEY.findall(message)
    key = ".".join(keys)
    unknown = _UNKNOWN.search(message)
    if unknown:
        name = unknown.group(1)
        cls_match = _CLASS.search(message)
        cls = _class(cls_match.group(1)) if cls_match else None
        allowed = accepted_options(cls) if cls is not None else []
        hint = _did_you_mean(name, allowed)
        owner = f" of {cls.__name__}" if cls is not None else ""
        listing = f" ({cls.__name__} accepts: {', '.join(allowed)})" if allowed else ""
        return f"{key}.{name} is not an option{owner}{hint}{listing}"
    got = _GOT.search(message)
    if got and _is_not_finite(got.group(2)):  # YAML reads nan and inf as text, not numbers
        return f"{key}: {got.group(2)} is not a finite number"
    if got:
        return f"{key}: {got.group(2)!r} is not a valid {_type_name(got.group(1))}"
    given = _GIVEN.search(message)
    if given and keys:
        if _is_not_finite(given.group(1)):
            return f"{key}: {given.group(1)} is not a finite number"
        subtypes = _SUBTYPES.search(message)
        expected = ([_type_name(t) for t in subtypes.group(1).split(", ")] if subtypes else
                    [_type_name(e) for e in _EXPECTED.findall(message)])
        kinds = " or ".join(dict.fromkeys(e.strip() for e in expected)) or "value"
        return f"{key}: {given.group(1)!r} is not a valid {kinds}"
    group = _GROUP.search(message)
    if group:
        wrong = f"--{group.group(1)}.{group.group(2)}"
        hint = _did_you_mean(wrong, options)
        return f"{wrong[2:]} is not an option{hint.replace('--', '')}"
    unrecognized = _UNRECOGNIZED.search(message)
    if unrecognized:
        wrong = unrecognized.group(1).split("=", 1)[0]
        return f"{wrong} is not an option{_did_you_mean(wrong, options)}"
    return " ".join(message.split())
