"""configs/text/: DySTreSS Table 12's rows through the real ``contrastkit pretrain`` parser."""

from __future__ import annotations

from pathlib import Path

import pytest

tiny_bert = pytest.importorskip("tiny_bert")

import contrastkit.cli.pretrain as cli_module  # noqa: E402
from contrastkit.losses import DySTreSSTemperature  # noqa: E402
from contrastkit.methods.simcse import SimCSE  # noqa: E402
from contrastkit.train.text import TextDataModule, TextPretrainModule, is_text_config  # noqa: E402

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "text").glob("*.yaml"))

#: Table 12 (DySTreSS, Manna et al. 2023): file -> temperature (t_min, t_max, shift, scale).
TABLE_12 = {
    "simcse.yaml": 0.05,
    "dystress_t0.03-0.05.yaml": DySTreSSTemperature(0.03, 0.05),
    "dystress_plus_t0.03-0.05.yaml": DySTreSSTemperature(0.03, 0.05, -0.2, 0.6),
    "dystress_star_t0.03-0.05.yaml": DySTreSSTemperature(0.03, 0.05, -0.4, 0.7),
    "dystress_2star_t0.03-0.05.yaml": DySTreSSTemperature(0.03, 0.05, -0.6, 0.8),
    "dystress_star_t0.02-0.05.yaml": DySTreSSTemperature(0.02, 0.05, -0.4, 0.7),
    "dystress_star_t0.05-0.07.yaml": DySTreSSTemperature(0.05, 0.07, -0.4, 0.7),
    "dystress_star_t0.04-0.05.yaml": DySTreSSTemperature(0.04, 0.05, -0.4, 0.7),
}


class _ParseOnly(cli_module.PretrainCLI):
    def instantiate_classes(self) -> None:
        pass


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    return tiny_bert.save_tiny_bert(tmp_path_factory.mktemp("bert"))


def test_every_row_has_a_config():
    assert {p.name for p in CONFIGS} == set(TABLE_12)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_text_config_parses_and_builds(path, bert_folder):
    """The SimCSE recipe (batch 64, lr 3e-5, 1 epoch, max length 32, BERT-base, [CLS]) and the
    row's temperature; built with the tiny BERT in place of bert-base-uncased (offline)."""
    assert path.read_text().startswith("# ") and "Table 12" in path.read_text()
    assert is_text_config(["--config", str(path)])
    cli = _ParseOnly(TextPretrainModule, TextDataModule, run=False,
                     args=["--config", str(path),
                           "--model.method.init_args.encoder.name", str(bert_folder)],
                     trainer_defaults=cli_module.trainer_defaults("runs/test-configs"),
                     parser_kwargs={"prog": "contrastkit pretrain", "default_env": False})
    config = cli.config
    assert config.model.method.init_args.encoder.max_length == 32
    assert config.model.method.init_args.encoder.pooling == "cls"
    assert config.data.batch_size == 64 and config.trainer.max_epochs == 1
    built = cli.parser.instantiate_classes(config)
    method = built.model.method
    assert isinstance(method, SimCSE) and isinstance(built.data, TextDataModule)
    assert method.temperature == TABLE_12[path.name]
    spec = built.model.optimizer_spec
    assert (spec.name, spec.base_lr, spec.scale_lr) == ("adamw", 3e-5, False)
