#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image: it installs
# the kit (bundled in source/kit, with the reference solutions and the hidden
# tests) into its own virtual environment. AUTOGRADER_ROOT replaces
# /autograder for a trial run on your own machine.
set -euo pipefail

ROOT="${AUTOGRADER_ROOT:-/autograder}"
KIT="$ROOT/source/kit"
VENV="$ROOT/venv"

# The kit needs Python 3.11 or newer; older base images get it from apt.
find_python() {
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
           "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if ! PYTHON="$(find_python)"; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3.11 python3.11-venv
    PYTHON=python3.11
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e "$KIT"

# A broken bundle should fail here, where the instructor sees it, not on a student's submission.
cd "$KIT"
"$VENV/bin/python" -m pytest tests grader/hidden_tests --impl solutions -q -p no:cacheprovider

# The kit's own check (the reference graded by the grader, as a submission's run would first do), kept in the
# image's cache: each submission then finds its kit checked, grades the student alone, and stops each test at its
# channel limit (a multiple of what the reference sends in that test, measured here). A check that fails is not
# kept: the submissions' runs check again.
PART="@@PART@@"
if [ -n "$PART" ]; then export ATTENTION_KIT_PART="$PART"; fi
CHECK="$(mktemp -d)"
mkdir -p "$CHECK/submission"
cp solutions/*.py "$CHECK/submission/"
"$VENV/bin/python" -m grader.grading.gradescope --autograde "$CHECK" >/dev/null || true
rm -rf "$CHECK"

# Without namespaces (--container) the worker runs student code as an unprivileged user with no mount
# namespace: the kit (reference solutions, tests, hidden tests) must be out of its reach. Root grades.
chmod 700 "$KIT"
