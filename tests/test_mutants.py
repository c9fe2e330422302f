"""Tests that pin behaviour a mutant of the core changed without any other test noticing
(`make mutation`, docs/mutation.md). Each names the mutant it kills."""

from __future__ import annotations
