"""The offline text corpus of the sentence demo (docs/text.md)."""

from __future__ import annotations

from examples.demos import text_corpus


def test_held_out_pairs_are_near_copies_and_other_sentences():
    sentences = [f"Sentence number {i} has several plain words." for i in range(6)]
    pairs = text_corpus.held_out_pairs(sentences, seed=1)
    assert len(pairs) == 12
    for i, sentence in enumerate(sentences):
        (a, near, high), (b, other, low) = pairs[2 * i], pairs[2 * i + 1]
        assert a == b == sentence and (high, low) == (5.0, 0.0)
        words, kept = sentence.split(), near.split()
        assert len(kept) == len(words) - 1 and kept[0] == words[0]
        assert any(words[:j] + words[j + 1:] == kept for j in range(1, len(words)))
        assert other in sentences and other != sentence


def test_docstring_sentences_are_prose(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""A module that does one plain thing well enough.\n\n'
                      '>>> code_line(1)\n"""\n\ndef f():\n'
                      '    """Return the value of the thing for the caller. Short one."""\n')
    docs = list(text_corpus._docstrings(source))
    assert len(docs) == 2
    text = " ".join(docs[1].split())
    kept = [s for s in text_corpus._SENTENCE_END.split(text) if text_corpus._PROSE.match(s)]
    assert kept == ["Return the value of the thing for the caller.", "Short one."]


def test_main_writes_the_two_files(tmp_path, monkeypatch):
    sentences = [f"Plain sentence {i} with enough words in it." for i in range(10)]
    monkeypatch.setattr(text_corpus, "stdlib_sentences", lambda seed: sentences)
    assert text_corpus.main([str(tmp_path), "--train", "6", "--held-out", "3"]) == 0
    assert (tmp_path / "train.txt").read_text().splitlines() == sentences[:6]
    assert len((tmp_path / "heldout_pairs.tsv").read_text().splitlines()) == 6
