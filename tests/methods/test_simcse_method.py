"""SimCSE method and text encoder on a tiny random BERT saved to a folder (offline)."""

from __future__ import annotations

import pytest
import torch

tiny_bert = pytest.importorskip("tiny_bert")

from contrastkit.losses import DySTreSSTemperature, simcse  # noqa: E402
from contrastkit.methods.simcse import SimCSE  # noqa: E402
from contrastkit.models.text import (  # noqa: E402
    TextEncoderSpec,
    build_text_encoder,
    embed_sentences,
)
from contrastkit.schedules import ScheduleState  # noqa: E402

STATE = ScheduleState(step=0, total_steps=10, epoch=0.0, total_epochs=1.0)


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    return str(tiny_bert.save_tiny_bert(tmp_path_factory.mktemp("tiny_bert")))


def test_mean_pooling_averages_the_tokens_of_each_sentence(bert_folder):
    encoder = build_text_encoder(TextEncoderSpec(name=bert_folder, pooling="mean"))
    encoder.eval()
    sentences = ["a cat sat on the mat", "dog"]
    tokens = encoder.tokenize(sentences)
    hidden = encoder.model(**tokens).last_hidden_state
    pooled = encoder(tokens)
    for i in range(2):
        length = int(tokens["attention_mask"][i].sum())
        torch.testing.assert_close(pooled[i], hidden[i, :length].mean(0))
    # padding does not change a sentence's vector: alone it gets the same one
    torch.testing.assert_close(embed_sentences(encoder, ["dog"])[0], pooled[1].detach(),
                               rtol=1e-5, atol=1e-5)


def test_cls_pooling_and_max_length(bert_folder):
    encoder = build_text_encoder(TextEncoderSpec(name=bert_folder, pooling="cls", max_length=4))
    encoder.eval()
    tokens = encoder.tokenize(["a cat sat on the mat", "dog"])
    assert tokens["input_ids"].shape == (2, 4)  # truncated: [CLS] a cat [SEP]
    hidden = encoder.model(**tokens).last_hidden_state
    torch.testing.assert_close(encoder(tokens), hidden[:, 0])
    assert encoder.model.pooler is None  # BERT's own pooler is not used: dropped


def test_unknown_model_name_is_one_line_error():
    with pytest.raises(ValueError, match=r"encoder.name 'no-such-org/no-such-model'") as err:
        build_text_encoder(TextEncoderSpec(name="no-such-org/no-such-model"))
    assert "\n" not in str(err.value)
    assert "HF_HUB_OFFLINE=1" in str(err.value)  # how to skip the Hub's retries without network
    with pytest.raises(FileNotFoundError, match=r"encoder\.name"):
        build_text_encoder(TextEncoderSpec(name="./no/such/folder"))


def test_two_dropout_passes_are_the_positive_pair(bert_folder):
    method = SimCSE(TextEncoderSpec(name=bert_folder), temperature=0.05)
    assert all(m.training for m in method.modules())  # built in training mode: dropout on
    tokens = method.tokenize(tiny_bert.sentences(6))
    method.eval()  # no dropout: the two passes agree
    assert method(tokens, STATE).logs["positive_similarity"].item() == pytest.approx(1.0)
    method.train()
    torch.manual_seed(0)
    out = method(tokens, STATE)
    assert out.logs["positive_similarity"].item() < 1.0 - 1e-6  # dropout masks differ
    # The loss is simcse() of the MLP outputs of the two passes, drawn with the same masks.
    torch.manual_seed(0)
    features = method.backbone({k: torch.cat([v, v]) for k, v in tokens.items()})
    z = method.projector(features)
    torch.testing.assert_close(out.loss, simcse(z[:6], z[6:], temperature=0.05))
    assert out.features.shape == (6, 32)


def test_dystress_temperature_goes_through_the_loss(bert_folder):
    t = DySTreSSTemperature(0.03, 0.05, shift=-0.4, scale=0.7)
    method = SimCSE(TextEncoderSpec(name=bert_folder, pooling="mean"), temperature=t)
    assert isinstance(method.projector, torch.nn.Identity)  # mean pooling: no MLP (SimCSE)
    tokens = method.tokenize(tiny_bert.sentences(5))
    torch.manual_seed(1)
    out = method(tokens, STATE)
    torch.manual_seed(1)
    z = method.backbone({k: torch.cat([v, v]) for k, v in tokens.items()})
    torch.testing.assert_close(out.loss, simcse(z[:5], z[5:], temperature=t))
    out.loss.backward()
    assert method.backbone.model.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_bad_temperature_names_the_method(bert_folder):
    with pytest.raises(ValueError, match="SimCSE: temperature"):
        SimCSE(TextEncoderSpec(name=bert_folder), temperature=0.0)
