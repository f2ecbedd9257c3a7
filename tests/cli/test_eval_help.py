"""`--help` of the evaluation commands shows each option's default (issue 19, item 8; compare,
voc07, sts and finetune since)."""

from __future__ import annotations

import re

import pytest

from contrastkit.cli import main

COMMANDS = [["eval"], ["eval", "knn"], ["eval", "linear"], ["eval", "lowshot"],
            ["eval", "retrieval"], ["analyze"], ["embed"], ["compare"], ["eval", "voc07"],
            ["eval", "sts"], ["eval", "finetune"]]
#: options that must be given (no default to show), per command
REQUIRED = {"eval voc07": ("--root",), "eval sts": ("--model",),
            "eval finetune": ("--output",)}


def _option_blocks(text: str) -> dict[str, str]:
    """``{first option string: its help text}`` of an argparse help page (wrapped lines joined)."""
    blocks: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        match = re.match(r"^  (-[-\w]+)", line)
        if match:
            name = match.group(1)
            blocks[name] = line
        elif name and line.startswith("    "):
            blocks[name] += " " + line.strip()
        else:
            name = None
    return blocks


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_option_shows_its_default(capsys, argv):
    blocks = _option_blocks(_help(capsys, argv))
    assert "-h" in blocks
    exempt = ("-h", "--checkpoint", "--data", *REQUIRED.get(" ".join(argv), ()))
    missing = [name for name, block in blocks.items()
               if name not in exempt and "default" not in block]
    assert missing == [], missing


def test_the_defaults_shown_are_the_parsers_values(capsys):
    blocks = _option_blocks(_help(capsys, ["eval", "knn"]))
    assert "(default: cosine)" in blocks["--metric"]
    assert "(default: 256)" in blocks["--batch-size"]
    assert "(default: off)" in blocks["--baselines"]
    assert "else 200" in blocks["--k"]  # worded by the option itself, not "(default: None)"
    assert "None" not in "".join(blocks.values())
    blocks = _option_blocks(_help(capsys, ["analyze"]))
    assert "(default: [0.05, 0.1, 0.2, 0.5])" in blocks["--temperatures"]
    assert "(default: 10)" in blocks["--neighbors"]
    assert "required" in _option_blocks(_help(capsys, ["embed"]))["--output"]
    assert "(default: 1000)" in _option_blocks(_help(capsys, ["compare"]))["--resamples"]
    blocks = _option_blocks(_help(capsys, ["eval", "voc07"]))
    assert "(default: [0.01, 0.1, 1.0, 10.0, 100.0])" in blocks["--costs"]
    assert "(default: 224)" in blocks["--size"]
