"""JSON documents as the renderers write them; the encoder itself is ``aiprof.jsontext``
(the run record and saved ceilings use it too, below the renderers)."""

from aiprof.jsontext import dumps

__all__ = ["dumps"]
