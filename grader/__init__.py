"""The instructor and student tools of the self-attention exercise kit.

Submodules are imported lazily by the command line, so that importing
``grader.curriculum`` from the test suite stays cheap.
"""
