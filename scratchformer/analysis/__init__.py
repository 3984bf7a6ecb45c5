"""Embedding analysis that works the same on Scratchformer and on any BERT/DistilBERT-style model.

The extractor and the pieces it is made of:

- :mod:`~scratchformer.analysis.encoding` - tokenization, length-sorted batches and the forward pass;
- :mod:`~scratchformer.analysis.layers` - what ``layer="learned"``, ``0`` and ``k`` stand for;
- :mod:`~scratchformer.analysis.words` - finding a word's characters and the tokens that cover them;
- :mod:`~scratchformer.analysis.pooling` - pooling a word's sub-tokens or a sentence's tokens;
- :mod:`~scratchformer.analysis.similarity` - cosine with its unrelated-pair baseline and centred cosine;
- :mod:`~scratchformer.analysis.attention` - attention maps, with the switch to the eager kernel, and bertviz's inputs;
- :mod:`~scratchformer.analysis.results` - the result dataclasses;
- :mod:`~scratchformer.analysis.extractor` - :class:`EmbeddingExtractor`, the ``TextEncoder`` that uses all of the
  above, and :func:`load_extractor`.

The studies built on it:

- :mod:`~scratchformer.analysis.bank` - the "bank" study behind ``scratchformer compare`` (tables, JSON);
- :mod:`~scratchformer.analysis.sense_data` and :mod:`~scratchformer.analysis.senses` - the WordNet word-sense data
  and evaluation behind ``scratchformer senses``;
- :mod:`~scratchformer.analysis.geometry_data`, :mod:`~scratchformer.analysis.geometry` and
  :mod:`~scratchformer.analysis.geometry_run` - ``scratchformer geometry``: how contextual each layer's vectors are
  (Ethayarajh 2019: self-similarity, intra-sentence similarity, MEV, the anisotropy baseline; raw and standardised);
- :mod:`~scratchformer.analysis.plots` - the PNG figures of all three (labels placed by
  :mod:`~scratchformer.analysis.label_placement`);
- :mod:`~scratchformer.analysis.report` - ``compare --html``: one self-contained page with an interactive attention
  view (its CSS and JavaScript in :mod:`~scratchformer.analysis.report_assets`);
- :mod:`~scratchformer.analysis.output` - their output folder (checked before any model loads) and JSON files.

This layer reads models through :func:`scratchformer.loading.load` and raises
:class:`~scratchformer.errors.ScratchformerError` for every mistake in its input; it never imports the training code.
"""
