"""Pictures of rows: the shared drawing of every benchmark's previewer and of the demo report (``figures``: masks
over images, tiles, captions, colour-blind-safe colours) and the ``preview`` column of an export (``previews``:
the tile rules, the per-row pixel budget, the deterministic encoding). Light to import (Pillow and numpy), so a
benchmark's descriptor names its previewer directly."""
