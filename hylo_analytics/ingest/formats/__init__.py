"""The source formats, one package each: its reader (``READER``) and the modules only it uses.

Every package exposes the same shape: ``FORMAT`` (the ``runs.source_format`` it writes),
``sniff(head, path)`` and ``parse(con, files)``, bundled as a
:class:`~hylo_analytics.ingest._reader.Reader` named ``READER`` (or several, ``READERS``).
:mod:`hylo_analytics.ingest._registry` lists them in the order they are asked; a reader
installed by another package joins them through the ``hylo_analytics.readers`` entry point
group (:func:`hylo_analytics.ingest._registry.readers`).
"""
