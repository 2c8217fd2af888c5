"""The graded suite: test files, the pytest plugin, and the helpers that explain failures."""
