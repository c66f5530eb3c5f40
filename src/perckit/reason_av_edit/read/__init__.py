"""Reading a ReasonAVEdit-Bench release and a folder of ``av_reasoning`` predictions, through the checked readers.

- :mod:`.metadata`: ``metadata.csv`` into :class:`~.metadata.Sample` rows and ``annotations/<id>.json`` into typed
  fields, with the card's categories and sub-tracks;
- :mod:`.archives`: finding the tars, the member guard every tar is read under, the bounded local and streaming
  readers, and :func:`~.archives.extract_archives`, the safe extractor for users and tests (the builder never
  extracts);
- :mod:`.media`: where each media value comes from (the tars read, the disk, the lookup by sample id);
- :mod:`.predictions`: a folder of per-sample prediction files into prediction rows.

Where the files are is :mod:`..layout`; one builder row from what these read is :mod:`..rows`. Errors name the
file, the archive member or the CSV column, what was expected and what was found.
"""
