"""Exercises: the learner writes code, live runs grade it."""
