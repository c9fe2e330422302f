"""Where `toolstop demo --thread` keeps conversations.

An alias of `toolstop.cli.checkpoints`, kept so the documented import path keeps working."""

from toolstop.cli.checkpoints import default_db_path, open_checkpointer

__all__ = ["default_db_path", "open_checkpointer"]
