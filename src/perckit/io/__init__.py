"""The I/O guards: paths from data resolved under their root and checked reads (``paths``), JSON with
repeated keys refused (``jsonio``), Parquet (``parquetio``), image headers (``images``), read-ahead
(``prefetch``) and weights loaded as data (``model_files``)."""
