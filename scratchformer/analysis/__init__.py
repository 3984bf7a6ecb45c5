"""Embedding analysis that works the same on Scratchformer and on any BERT/DistilBERT-style model (what each module
does: docs/embeddings.md, "Where the code lives").

The extractor, scratchformer.analysis.extractor, and its parts: scratchformer.analysis.encoding,
scratchformer.analysis.layers, scratchformer.analysis.words, scratchformer.analysis.pooling,
scratchformer.analysis.similarity, scratchformer.analysis.attention and scratchformer.analysis.results. The
commands: scratchformer.analysis.bank (compare), scratchformer.analysis.sense_data and scratchformer.analysis.senses
(senses), scratchformer.analysis.geometry_data, scratchformer.analysis.geometry and scratchformer.analysis.geometry_run
(geometry); their output: scratchformer.analysis.plots (with scratchformer.analysis.label_placement),
scratchformer.analysis.report (with scratchformer.analysis.report_assets) and scratchformer.analysis.output.
"""
