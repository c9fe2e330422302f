"""The engine of `toolstop check`: scenarios, routers, runs compared with golden transcripts.

It also runs the same checks through a user's own agent factory. Its public names are
re-exported by `toolstop.testing`."""
