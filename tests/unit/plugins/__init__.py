"""Tests of the built-in scheduling plugins."""
