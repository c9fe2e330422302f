"""Checkpoints decoded without building anything a blob names: see `toolstop._decode`.

The decoder lives in the library (the canary's way back reads records with it too); this module
keeps the import path the report, `explain` and `demo --thread` use."""

from toolstop._decode import SafeDecoder, install

__all__ = ["SafeDecoder", "install"]
