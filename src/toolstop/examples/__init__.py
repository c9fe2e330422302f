"""Example tools that signal through their artifact. Each factory builds fresh state."""

from toolstop.examples.business import make_pay_tool, make_poll_job_tool, make_write_record_tool
from toolstop.examples.search import SEARCH_INDEX, make_search_tool

__all__ = [
    "SEARCH_INDEX",
    "make_pay_tool",
    "make_poll_job_tool",
    "make_search_tool",
    "make_write_record_tool",
]
