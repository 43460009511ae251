"""Timed mock interviews and their reports."""
