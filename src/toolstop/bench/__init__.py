"""`toolstop bench`: the savings of per-call stops (model calls, tokens, time), side by side."""
