"""Grading: running hidden tests, parsing JUnit XML, scoring."""
