"""`toolstop report` and `toolstop explain`: stop records read back from checkpoints or logs."""
