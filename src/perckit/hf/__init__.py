"""The Hugging Face layer: the builder base (``builder``), the evaluate metric base (``metric``) with the
feature check (``feature_check``), the accumulators (``accumulate``), the benchmark descriptor
(``benchmark``), the Hub download (``hub``), the one API on both datasets lines (``api``,
``entrypoints``, ``versioning``) and the command-line scaffold (``cli``)."""
