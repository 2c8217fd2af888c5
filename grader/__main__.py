"""``python -m grader`` is the same as ``attention-kit``."""

import sys

from grader.cli import main

sys.exit(main())
