"""Messages of `contrastkit pretrain` (issue 19, item 6): one-line config errors naming the key,
the value and the closest valid keys; a short --help with the method's settings; --version;
warnings without internal source lines."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from pretrain_args import TINY, method_args

from contrastkit.cli import main
from contrastkit.cli.pretrain import build
from contrastkit.cli.short_help import DATA_DEFAULTS, constructor_defaults


def _one_line_error(capsys, *extra: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(["pretrain", *TINY, *method_args("SCE"), *extra])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "usage:" not in captured.err + captured.out, captured.err
    assert lines[0].startswith("contrastkit pretrain: error: ")
    return lines[0]


@pytest.mark.parametrize(("extra", "expected"), [
    (("--trainer.max_epochs", "five"), "trainer.max_epochs: 'five' is not a valid int or null"),
    (("--model.method.temprature", "0.1"),
     "model.method.temprature is not an option of SCE; did you mean temperature"),
    (("--data.bach_size", "12"), "--data.bach_size is not an option; did you mean "
                                 "--data.batch_size"),
    # no abbreviation (a batch of 1 stops the old parser's silent max_epochs before training)
    (("--trainer.max_epoch", "3", "--data.batch_size", "1"), "did you mean --trainer.max_epochs"),
    (("--model.optimizer.name", "adagrad"), "model.optimizer.name: 'adagrad' is not a valid "
                                            "value, one of 'sgd', 'lars', 'adamw', 'adam'"),
])
def test_config_errors_are_one_line_with_the_key_value_and_closest_keys(capsys, extra, expected):
    assert expected in _one_line_error(capsys, *extra)


def test_a_misspelled_key_in_a_yaml_config_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer:\n  max_epoch: 3\n")
    line = _one_line_error(capsys, "--config", str(bad))
    assert "trainer.max_epoch is not an option; did you mean trainer.max_epochs" in line


def test_help_is_short_and_shows_the_method_settings(capsys):
    assert main(["pretrain", "--model.method", "contrastkit.methods.SimCLR", "--help"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) < 120
    for option in ("--output DIR", "--resume PATH|last", "--model.method.temperature",
                   "--model.optimizer.warmup_fraction", "--trainer.max_epochs", "--help-all"):
        assert option in out
    assert "settings of SimCLR" in out and "--trainer.gradient_clip_val" not in out
    with pytest.raises(SystemExit):
        main(["pretrain", "--help-all"])
    assert "--trainer.gradient_clip_val" in capsys.readouterr().out


def test_the_short_help_loads_no_lightning():
    # the dispatcher prints it without the pretrain module, which loads Lightning (seconds)
    code = ("import sys; from contrastkit.cli import main; main(['pretrain', '--help']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lightning'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "--data.batch_size" in out and out.strip().endswith("[]")


def test_the_short_helps_data_defaults_are_the_datamodules():
    from contrastkit.train.datamodule import PretrainDataModule

    signature = dict(constructor_defaults(PretrainDataModule))
    assert dict(DATA_DEFAULTS) == {key: signature[key] for key, _ in DATA_DEFAULTS}


def test_the_pretrain_function_prints_the_same_short_help(capsys):
    main(["pretrain", "--model.method", "MoCo", "--help"])
    dispatched = capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        build(["--model.method", "MoCo", "--help"])
    assert exit_.value.code == 0 and capsys.readouterr().out == dispatched
    assert "settings of MoCo" in dispatched


def test_version(capsys):
    from contrastkit import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"contrastkit {__version__}"


def test_warnings_print_one_line_without_source(monkeypatch, capsys):
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    with pytest.raises(SystemExit):  # pretrain imports Lightning, which sets its own format
        main(["pretrain", "--version"])
    text = warnings.formatwarning("the bank is small", UserWarning, "/x/internal.py", 12,
                                  "warnings.warn('the bank is small')")
    assert text == "warning: the bank is small\n"
