"""The reference implementations (instructors only; never shipped to students)."""
