"""Text: the vocabulary file, the WordPiece tokenizer and the vocabulary builder.

`vocab` reads a vocabulary and its special tokens without TensorFlow;
`tokenizer` is WordPiece through tensorflow-text (FastBertTokenizer), the same
in Python and in a served graph; `vocab_builder` learns a vocabulary from a
corpus (`python -m electra_tf.build_vocab`).
"""
