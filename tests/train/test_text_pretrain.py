"""``contrastkit pretrain`` on sentences: a tiny random BERT, unsupervised SimCSE, exact resume,
the NaN stop."""

from __future__ import annotations

import json

import pytest
import torch

tiny_bert = pytest.importorskip("tiny_bert")

from pretrain_args import StopAfterEpochs  # noqa: E402

from contrastkit.cli.pretrain import build, pretrain  # noqa: E402
from contrastkit.train.module import NonFiniteLossError  # noqa: E402
from contrastkit.train.text import TextPretrainModule, is_text_config  # noqa: E402


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("text_run")
    bert = tiny_bert.save_tiny_bert(root / "bert")
    text = root / "wiki.txt"
    text.write_text("\n".join(tiny_bert.sentences(48)) + "\n")
    return bert, text


def _args(inputs, output, *extra: str) -> list[str]:
    bert, text = inputs
    return [
        "--data.text_file", str(text), "--data.batch_size", "8",
        "--model.method", "contrastkit.methods.simcse.SimCSE",
        "--model.method.encoder", f'{{"name": "{bert}", "max_length": 12}}',
        "--model.method.temperature", "contrastkit.losses.DySTreSSTemperature",
        "--model.method.temperature.t_min", "0.03", "--model.method.temperature.t_max", "0.05",
        "--model.method.temperature.shift", "-0.4", "--model.method.temperature.scale", "0.7",
        "--model.optimizer", '{"name": "adamw", "base_lr": 1e-3, "scale_lr": false, '
        '"weight_decay": 0.0, "warmup_epochs": 0}',
        "--trainer.accelerator", "cpu", "--trainer.devices", "1",
        "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
        "--output", str(output), *extra]


def _state(path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)




def test_text_runs_are_recognised(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("data:\n  text_file: wiki.txt\n")
    assert is_text_config(["--config", str(config)])
    assert is_text_config(["--data.text_file=x.txt"])
    assert not is_text_config(["--data.dataset", "digits"])


def test_pretrain_resumes_exactly(tmp_path, inputs):
    """3 epochs straight == 1 epoch, interruption, resume: weights, AdamW state, scheduler
    and RNG (dropout) state agree; the weights moved from the pretrained ones."""
    straight = pretrain(_args(inputs, tmp_path / "straight", "--trainer.max_epochs", "3"))
    assert isinstance(straight.model, TextPretrainModule)
    metrics = straight.trainer.callback_metrics
    assert torch.isfinite(metrics["train/loss"])
    assert metrics["train/positive_similarity"] < 1 - 1e-6  # dropout on: two distinct passes
    args = _args(inputs, tmp_path / "split", "--trainer.max_epochs", "3")
    cli, _ = build(args)
    cli.trainer.callbacks.append(StopAfterEpochs(1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert _state(tmp_path / "split" / "checkpoints" / "last.ckpt")["global_step"] == 6
    pretrain([*args, "--resume", "last"])

    a = _state(tmp_path / "straight" / "checkpoints" / "last.ckpt")
    b = _state(tmp_path / "split" / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 18
    assert a["contrastkit"]["method"] == "SimCSE"
    assert a["contrastkit"]["backbone"]["name"] == str(inputs[0])
    assert a["contrastkit"]["data"]["text_file"] == str(inputs[1])
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6, msg=key)
    opt_a, opt_b = a["optimizer_states"][0]["state"], b["optimizer_states"][0]["state"]
    for idx, st in opt_a.items():
        torch.testing.assert_close(opt_b[idx]["exp_avg"], st["exp_avg"], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(b["rng_states"]["torch"], a["rng_states"]["torch"])
    start = tiny_bert.transformers.BertModel.from_pretrained(inputs[0]).state_dict()
    moved = a["state_dict"]["method.backbone.model.embeddings.word_embeddings.weight"]
    assert not torch.allclose(moved, start["embeddings.word_embeddings.weight"])
    _evaluate(tmp_path, tmp_path / "split" / "checkpoints" / "last.ckpt", b["state_dict"])


def _evaluate(tmp_path, ckpt, state_dict) -> None:
    """``contrastkit eval sts`` on the checkpoint: its trained weights, [CLS] without the MLP,
    and the "all" Spearman of the cosines against the gold scores (scipy)."""
    from scipy import stats

    from contrastkit.cli import main
    from contrastkit.cli.sts import load_text_checkpoint
    from contrastkit.data.sources.sts import read_task
    from contrastkit.models.text import embed_sentences

    root = tiny_bert.make_senteval_root(tmp_path / "downstream")
    out = tmp_path / "eval"
    assert main(["eval", "sts", "--checkpoint", str(ckpt), "--senteval-root", str(root),
                 "--tasks", "STS13", "--output", str(out)]) == 0
    got = json.loads((out / "results.json").read_text())["metrics"]["STS13"]["all"]
    encoder = load_text_checkpoint(str(ckpt))
    for key, value in encoder.state_dict().items():
        torch.testing.assert_close(value, state_dict[f"method.backbone.{key}"], msg=key)
    task = read_task(root, "STS13")
    # Encoded as the command does (each distinct sentence once, one batch): a random tiny BERT
    # gives cosines so close to each other that another padding would reorder them.
    unique = sorted({s for subset in task.sets for s in (*subset.first, *subset.second)})
    vectors = dict(zip(unique, embed_sentences(encoder, unique), strict=True))
    cosines, gold = [], []
    for subset in task.sets:
        a = torch.stack([vectors[s] for s in subset.first])
        b = torch.stack([vectors[s] for s in subset.second])
        cosines += torch.nn.functional.cosine_similarity(a, b).tolist()
        gold += subset.scores.tolist()
    assert got == pytest.approx(100 * stats.spearmanr(cosines, gold)[0], abs=1e-3)


def test_nan_loss_stops_with_the_step(tmp_path, inputs):
    cli, _ = build(_args(inputs, tmp_path / "nan", "--trainer.max_epochs", "2"))
    method = cli.model.method
    original = method.forward

    def poisoned(tokens, state):
        out = original(tokens, state)
        if state.step >= 7:
            out.loss = out.loss * float("nan")
        return out

    method.forward = poisoned
    with pytest.raises(NonFiniteLossError, match="at step 7"):
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert _state(tmp_path / "nan" / "checkpoints" / "last.ckpt")["global_step"] == 6


def test_empty_text_file_is_one_line_error(tmp_path, inputs):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    args = _args(inputs, tmp_path / "run", "--trainer.max_epochs", "1")
    args[args.index("--data.text_file") + 1] = str(empty)
    with pytest.raises(ValueError, match=r"data\.text_file: .*empty\.txt holds no sentence"):
        build(args)


def test_unknown_model_name_is_one_line_error(tmp_path, inputs):
    args = _args(inputs, tmp_path / "run", "--trainer.max_epochs", "1")
    args[args.index("--model.method.encoder") + 1] = '{"name": "no-such-org/no-such-model"}'
    with pytest.raises(ValueError, match=r"^encoder\.name 'no-such-org/no-such-model': ") as err:
        build(args)
    assert "\n" not in str(err.value)
