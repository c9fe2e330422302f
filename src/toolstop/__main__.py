"""`python -m toolstop`."""

from toolstop.cli import main_entry

main_entry()
