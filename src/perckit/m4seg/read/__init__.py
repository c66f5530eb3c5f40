"""Reading M⁴Seg's files through the checked readers; nothing holds a split in memory.

- :mod:`~perckit.m4seg.read.native`: the native gzip JSON, cut into items by a bounded scan and each parsed by
  ``orjson`` (the prepass, the ``num_proc`` shards, the rows);
- :mod:`~perckit.m4seg.read.parquet`: the Parquet shards (schema, row-group shards, the example-id scan) and
  the column path that converts a record batch to one Arrow table of the builder's schema;
- :mod:`~perckit.m4seg.read.ids`: example ids in flat memory (:class:`~perckit.m4seg.read.ids.IdGuard`);
- :mod:`~perckit.m4seg.read.images`: the source images under ``image_root``;
- :mod:`~perckit.m4seg.read.predictions`: the user's prediction files and model output.

Where the files are is :mod:`perckit.m4seg.layout`; one example to one row, with every field check, is
:mod:`perckit.m4seg.rows`."""
