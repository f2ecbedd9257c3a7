"""Issue 37 item 8: a mistyped option or sub-command of ``eval`` (and of every other command
but ``pretrain``, whose parser is LightningCLI's) is one line naming the closest valid ones, as
``pretrain`` does; ``--threads`` is in every computing command's ``--help``."""

from __future__ import annotations

import pytest

from contrastkit.cli import main


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err  # no usage text
    return err.strip()


@pytest.mark.parametrize(("argv", "wrong", "meant"), [
    (["eval", "knn", "--checkpoint", "c.ckpt", "--data", "digits", "--baselnes"],
     "--baselnes", "--baselines"),
    (["eval", "linear", "--checkpoint", "c.ckpt", "--data", "digits", "--epohcs=5"],
     "--epohcs", "--epochs"),
    (["analyze", "--checkpoint", "c.ckpt", "--data", "digits", "--temperatrues", "0.1"],
     "--temperatrues", "--temperatures"),
    (["embed", "--checkpoint", "c.ckpt", "--data", "folder", "--skip-corupt"],
     "--skip-corupt", "--skip-corrupt"),
    (["compare", "a", "b", "--resmaples", "10"], "--resmaples", "--resamples"),
])
def test_an_unknown_option_names_the_closest(capsys, argv, wrong, meant):
    prog = "contrastkit " + " ".join(a for a in argv[:2] if a in ("eval", "knn", "linear",
                                                               "analyze", "embed", "compare"))
    err = _error(capsys, argv)
    assert err.startswith(f"{prog}: error: {wrong} is not an option of {prog}; did you mean "
                          f"{meant}")
    assert err.endswith(f"({prog} --help lists them)")


def test_a_mistyped_protocol_or_command_names_the_closest(capsys):
    err = _error(capsys, ["eval", "knnn", "--checkpoint", "c.ckpt", "--data", "digits"])
    assert err.startswith("contrastkit eval: error: argument PROTOCOL: invalid choice: 'knnn'")
    assert err.endswith("did you mean knn?")
    assert main(["analyse", "--checkpoint", "c.ckpt"]) == 2
    assert capsys.readouterr().err.strip() == (
        "contrastkit: error: unknown command 'analyse'; did you mean analyze? "
        "(contrastkit --help lists them)")


def test_a_missing_option_is_one_line(capsys):
    err = _error(capsys, ["eval", "knn", "--data", "digits"])
    assert err == ("contrastkit eval knn: error: the following arguments are required: "
                   "--checkpoint")


@pytest.mark.parametrize("argv", [["pretrain"], ["eval", "knn"], ["eval", "linear"],
                                  ["eval", "lowshot"], ["eval", "retrieval"],
                                  ["eval", "voc07"], ["eval", "sts"], ["eval", "finetune"],
                                  ["analyze"], ["embed"]], ids=" ".join)
def test_threads_is_in_every_computing_commands_help(capsys, argv):
    try:  # argparse exits; pretrain's short help returns (the dispatcher prints it)
        code = main([*argv, "--help"])
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 0
    assert "--threads N|auto" in capsys.readouterr().out
