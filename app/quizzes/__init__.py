"""Quizzes and attempts: the question page, quizzes, grading and the attempts API."""
