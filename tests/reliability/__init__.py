"""Reliability tests: many writers, crashes, hostile input, environment faults (issue 7)."""
