"""``attention-kit similarity``: a class where two students share a module, read and compared as text."""

from __future__ import annotations

import csv
import importlib.util
import re
import sys
import zipfile
from pathlib import Path

import pytest

from grader import cli
from grader.curriculum import PART_ENV, ROOT
from grader.grading import similarity

# The tests that compare need the extra (CI installs it with `dev`); the one about its absence does not.
needs_copydetect = pytest.mark.skipif(importlib.util.find_spec("copydetect") is None,
                                      reason="the similarity extra (copydetect) is not installed")

STUB = (ROOT / "exercises" / "masks.py").read_text(encoding="utf-8")
REFERENCE = (ROOT / "solutions" / "masks.py").read_text(encoding="utf-8")

# Two honest students' own bodies for the four functions of masks.py, written differently from the reference and
# from each other (what a class hands in), put into the stub in place of its `raise NotImplementedError(...)`.
ALICE = {
    "causal_mask": """
    # rows are queries, columns are keys
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    query_index = np.arange(n)[:, None]
    key_index = np.arange(n)[None, :]
    return key_index <= query_index
""",
    "padding_mask": """
    if isinstance(max_len, bool) or not isinstance(max_len, (int, np.integer)) or max_len <= 0:
        raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
    sizes = np.asarray(lengths)
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu":
        raise ValueError(f"lengths must be 1-D integers, got {sizes.shape} {sizes.dtype}")
    if (sizes < 0).any() or (sizes > max_len).any():
        raise ValueError(f"lengths must be between 0 and {max_len}")
    slots = np.arange(max_len).reshape(1, 1, max_len)
    return slots < sizes.reshape(-1, 1, 1)
""",
    "combine_masks": """
    if len(masks) == 0:
        raise ValueError("masks: need at least one mask")
    combined = None
    for position, current in enumerate(masks):
        current = np.asarray(current)
        if current.dtype != bool:
            raise ValueError(f"masks[{position}] must be boolean, got {current.dtype}")
        if combined is None:
            combined = current
        else:
            try:
                combined = combined & current
            except ValueError:
                raise ValueError("masks do not broadcast together") from None
    return combined
""",
    "to_additive": """
    allowed = np.asarray(mask)
    if allowed.dtype != bool:
        raise ValueError(f"mask must be boolean, got {allowed.dtype}")
    if not np.issubdtype(np.dtype(dtype), np.floating):
        raise ValueError(f"dtype must be floating, got {dtype}")
    additive = np.zeros(allowed.shape, dtype=dtype)
    additive[~allowed] = -np.inf
    return additive
""",
}
CAROL = {
    "causal_mask": """
    if type(n) is not int or n < 1:
        raise ValueError("n: expected a positive int")
    table = np.zeros((n, n), dtype=bool)
    for row in range(n):
        table[row, : row + 1] = True
    return table
""",
    "padding_mask": """
    if type(max_len) is not int or max_len < 1:
        raise ValueError("max_len: expected a positive int")
    lengths = np.array(lengths)
    if len(lengths.shape) != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError("lengths: expected a vector of ints")
    if lengths.min(initial=0) < 0 or lengths.max(initial=0) > max_len:
        raise ValueError("lengths: out of range")
    out = np.zeros((len(lengths), 1, max_len), dtype=bool)
    for b, length in enumerate(lengths):
        out[b, 0, :length] = True
    return out
""",
    "combine_masks": """
    if not masks:
        raise ValueError("masks: none given")
    for i in range(len(masks)):
        if np.asarray(masks[i]).dtype.kind != "b":
            raise ValueError("masks[%d] is not boolean" % i)
    try:
        expanded = np.broadcast_arrays(*[np.asarray(m) for m in masks])
    except ValueError as problem:
        raise ValueError("masks: shapes do not broadcast") from problem
    return np.logical_and.reduce(expanded)
""",
    "to_additive": """
    m = np.array(mask)
    if m.dtype.kind != "b":
        raise ValueError("mask: expected booleans")
    kind = np.dtype(dtype)
    if kind.kind != "f":
        raise ValueError("dtype: expected a float type")
    with np.errstate(divide="ignore"):
        return np.log(m.astype(kind))
""",
}
# What bob changed in alice's module before handing it in: every name of hers, and her comments.
BOB_RENAMES = {"query_index": "q_pos", "key_index": "k_pos", "sizes": "lens", "slots": "idx", "combined": "acc",
               "position": "number", "current": "item", "allowed": "ok", "additive": "result"}


def fill(bodies: dict[str, str]) -> str:
    """The stub with each function's `raise NotImplementedError(...)` replaced by its body."""
    text = STUB
    for function, body in bodies.items():
        stub_line = rf"\n    raise NotImplementedError\('{function}:[^\n]*\n"
        text, count = re.subn(stub_line, body.replace("\\", "\\\\"), text)
        assert count == 1, function
    return text


def bob_from_alice(text: str) -> str:
    for old, new in BOB_RENAMES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text.replace("# rows are queries, columns are keys", "# i = query, j = key (lower triangle)")


def reordered_reference() -> str:
    """The reference with its variables renamed and its functions in another order (a copied reference)."""
    head, *functions = re.split(r"\n\n\n(?=def )", REFERENCE)
    text = "\n\n\n".join([head, *reversed(functions)])
    return re.sub(r"\barrays\b", "all_masks", text).replace("lengths[:, None]", "lengths[:,None]")


def write_module(folder: Path, text: str) -> None:
    folder.mkdir(parents=True)
    (folder / "masks.py").write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six entries: alice and bob share a module, carol wrote her own (a zip), dave copied the reference, erin
    handed in the stub, frank's zip is broken, and mallory (whose folder name holds a control character) handed in
    the stub too."""
    root = tmp_path_factory.mktemp("similarity") / "submissions"
    root.mkdir()
    alice = fill(ALICE)
    write_module(root / "alice", alice)
    write_module(root / "bob" / "hw", bob_from_alice(alice))  # one level down, as grade reads it
    with zipfile.ZipFile(root / "carol.zip", "w") as archive:
        archive.writestr("carol/masks.py", fill(CAROL))
    write_module(root / "dave", reordered_reference())
    write_module(root / "erin", STUB)
    (root / "frank.zip").write_bytes(b"not a zip at all")
    write_module(root / "__MACOSX", STUB)  # an archiver's folder: skipped, as grade skips it, and said
    write_module(root / "mallory\x1b[2J", STUB)
    return root


@pytest.fixture(scope="module")
def report(batch: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], int]:
    out = tmp_path_factory.mktemp("similarity-out") / "report"
    lines: list[str] = []
    status = similarity.similarity_report(batch, out, exercises=["masks"], echo=lines.append)
    return out, lines, status


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as stream:
        return list(csv.DictReader(stream))


@needs_copydetect
def test_the_pair_that_shares_a_module_is_on_top(report: tuple[Path, list[str], int]) -> None:
    out, _, status = report
    assert status == 0
    pairs = [row for row in rows(out / "similarity.csv") if row["table"] == "pair" and row["exercise"] == "masks"]
    assert pairs, "no pair listed"
    top = pairs[0]
    assert {top["student"], top["other"]} == {"alice", "bob"}, pairs
    assert float(top["score"]) >= 0.9, top
    assert all(float(row["score"]) < 0.5 for row in pairs[1:]), pairs
    assert not [row for row in pairs if "erin" in (row["student"], row["other"])], pairs  # the stub: nothing of hers


@needs_copydetect
def test_honest_students_and_the_stub_are_not_flagged(batch: Path, tmp_path: Path) -> None:
    texts = {"alice": fill(ALICE), "carol": fill(CAROL), "dave": reordered_reference(), "erin": STUB}
    result = similarity.compare_exercise("masks", texts, STUB, REFERENCE, tmp_path, html_reports=False)
    assert result.students == 4
    assert not [pair for pair in result.pairs if "erin" in (pair.first, pair.second)], result.pairs
    assert all(pair.score < similarity.DEFAULT_THRESHOLD for pair in result.pairs), result.pairs
    # The copied reference is closest to it, far ahead of the students who wrote their own code.
    assert result.closest[0].first == "dave" and result.closest[0].score >= 0.9, result.closest
    assert all(pair.score < 0.5 for pair in result.closest[1:]), result.closest


@needs_copydetect
def test_the_reference_is_boilerplate_for_the_pairs(tmp_path: Path) -> None:
    """Two students who both copied the reference are alike only against the reference, not as a pair."""
    texts = {"dave": reordered_reference(), "ida": REFERENCE}
    result = similarity.compare_exercise("masks", texts, STUB, REFERENCE, tmp_path, html_reports=False)
    assert all(pair.score < similarity.DEFAULT_THRESHOLD for pair in result.pairs), result.pairs
    assert [pair.first for pair in result.closest] == ["dave", "ida"], result.closest  # a tie: by name
    assert all(pair.score >= 0.9 for pair in result.closest), result.closest


@needs_copydetect
def test_the_reference_table_is_the_same_without_reused_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison with the reference reuses the pairs' tokens; copydetect tokenizing afresh gives the same."""
    texts = {"alice": fill(ALICE), "bob": bob_from_alice(fill(ALICE)), "carol": fill(CAROL),
             "dave": reordered_reference()}
    reused = similarity.compare_exercise("masks", texts, STUB, REFERENCE, tmp_path / "a", html_reports=False)
    monkeypatch.setattr(similarity, "_reuse_tokens", lambda *args: None)
    fresh = similarity.compare_exercise("masks", texts, STUB, REFERENCE, tmp_path / "b", html_reports=False)
    assert reused.closest == fresh.closest and len(fresh.closest) == 4, (reused.closest, fresh.closest)


@needs_copydetect
def test_every_entry_has_a_row(report: tuple[Path, list[str], int], batch: Path) -> None:
    out, lines, _ = report
    listed = rows(out / "submissions.csv")
    students = {row["student"]: row for row in listed}
    assert len(listed) == len(list(batch.iterdir())) - 1 == 7
    assert "note: __MACOSX was skipped (tools make such folders); rename it to compare it" in lines
    assert students["alice"]["status"] == "ok" and students["alice"]["compared"] == "masks"
    assert students["carol"]["status"] == "ok"  # a zip, read as grade reads it
    assert students["frank"]["status"].startswith("not compared: unreadable submission"), students["frank"]
    assert students["frank"]["compared"] == ""
    markdown = (out / "similarity.md").read_text(encoding="utf-8")
    assert "| frank | 0 | not compared: unreadable submission" in markdown
    assert any(line.startswith("  frank: not compared") for line in lines), lines


@needs_copydetect
def test_student_ids_are_escaped_on_the_terminal_and_in_the_html(report: tuple[Path, list[str], int]) -> None:
    out, _, _ = report
    page = (out / "html" / "masks.html").read_text(encoding="utf-8")
    assert "alice" in page and "bob" in page and "mallory\\x1b[2J" in page and "\x1b" not in page
    assert "attention-kit-similarity-" not in page, "a scratch path of the grader in the report"
    assert "alice" in (out / "html" / "masks-reference.html").read_text(encoding="utf-8")
    for name in ("similarity.md", "submissions.csv"):
        text = (out / name).read_text(encoding="utf-8")
        assert "\x1b" not in text and "mallory" in text, name
    pair = similarity.Pair("masks", "eve\x1b[31m", "zed\u202e", 0.9, (0.9, 0.8), 100)
    result = similarity.ExerciseResult("masks", 2, [pair], [pair])
    lines = "\n".join(similarity.summary_lines([result], top=5, threshold=0.5))
    assert "eve\\x1b[31m" in lines and "zed\\u202e" in lines and "\x1b" not in lines and "\u202e" not in lines


@needs_copydetect
def test_the_summary_lists_the_pair_first(report: tuple[Path, list[str], int]) -> None:
    _, lines, _ = report
    start = next(index for index, line in enumerate(lines) if line.startswith("masks ("))
    assert lines[start + 1] == "  most similar pairs:", lines
    first = lines[start + 2].split()
    assert first[1:3] == ["alice", "bob"], lines


@needs_copydetect
def test_cli_end_to_end(batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    status = cli.main(["similarity", str(batch), "--out", str(out), "--exercise", "masks", "--top", "1",
                       "--threshold", "0.2"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert re.search(r"^    1\.00  alice\s+bob", printed, re.M), printed
    listed = rows(out / "similarity.csv")
    assert [(row["table"], row["rank"]) for row in listed] == [("pair", "1"), ("reference", "1")]
    assert {p.name for p in (out / "html").iterdir()} == {"masks.html", "masks-reference.html"}
    # The side-by-side pages show what the tables list (--top 1), not every pair above the threshold.
    for name in ("masks.html", "masks-reference.html"):
        assert (out / "html" / name).read_text(encoding="utf-8").count("Test file:") == 1, name


@needs_copydetect
def test_cli_refuses_bad_options(batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["similarity", str(batch), "--out", str(tmp_path / "o"), "--threshold", "2"]) == 2
    assert "--threshold must be between 0 and 1" in capsys.readouterr().err
    assert cli.main(["similarity", str(batch), "--out", str(tmp_path / "o"), "--exercise", "maskz"]) == 2
    assert "no exercise named 'maskz'" in capsys.readouterr().err
    assert cli.main(["similarity", str(batch), "--out", str(batch / "alice" / "out")]) == 2
    assert "overlap" in capsys.readouterr().out


@needs_copydetect
def test_an_exercise_outside_the_courses_part_is_refused(batch: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(PART_ENV, "all")  # restored afterwards: --part sets it for this process
    assert cli.main(["similarity", str(batch), "--out", str(tmp_path / "o"), "--part", "1",
                     "--exercise", "training"]) == 2
    assert "--exercise training: not an exercise of this course's part" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_without_copydetect_one_line_names_the_extra(batch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for name in [name for name in sys.modules if name == "copydetect" or name.startswith("copydetect.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "copydetect", None)  # `import copydetect` now fails as if not installed
    status = cli.main(["similarity", str(batch), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.strip().splitlines() == [
        "error: the similarity report needs copydetect, which is not installed: "
        "pip install 'attention-kit[similarity]'"]
    assert not (tmp_path / "out").exists()


@needs_copydetect
def test_a_module_pasted_from_the_graded_tests_is_close_to_the_kit(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # The graded tests compute what they expect with implementations of their own, which students can read: a
    # module pasted from them is listed as close to the kit's code, as one copied from the reference would be.
    import ast

    source = (ROOT / "tests" / "test_15_tokenization.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    helpers = "\n\n".join(ast.get_source_segment(source, node) for node in tree.body
                          if isinstance(node, ast.FunctionDef) and node.name in ("own_train", "own_encode"))
    stub = (ROOT / "exercises" / "tokenization.py").read_text(encoding="utf-8")
    subs = tmp_path / "subs"
    own = ("def train_bpe(text, n_merges):\n    ids = list(text.encode())\n    merges = []\n"
           "    for step in range(n_merges):\n        counts = {}\n        for pair in zip(ids, ids[1:]):\n"
           "            counts[pair] = counts.get(pair, 0) + 1\n        if not counts:\n            break\n"
           "        best = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))\n        merges.append(best)\n"
           "    return merges\n")
    for student, text in (("paster", stub + "\n\n" + helpers.replace("own_train", "train_bpe")),
                          ("writer", stub + "\n\n" + own), ("other", stub + "\n\n" + own.replace("step", "i"))):
        (subs / student).mkdir(parents=True)
        (subs / student / "tokenization.py").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    status = cli.main(["similarity", str(subs), "--out", str(out), "--exercise", "tokenization", "--part", "all"])
    assert status == 0, capsys.readouterr().out
    closest = [row for row in rows(out / "similarity.csv") if row["table"] == "reference"]
    assert closest and closest[0]["student"] == "paster", closest
    assert float(closest[0]["score"]) >= 0.5, closest


# ---------------------------------------------------------------- what is graded, not only <exercise>.py

def payload(text: str) -> str:
    """``text`` as a submission would hide it: zlib-compressed, then base64 (a constant of the module)."""
    import base64
    import zlib

    return base64.b64encode(zlib.compress(text.encode("utf-8"))).decode("ascii")


# Each hides alice's masks.py behind code that builds it at run time: the family, not one instance of it.
RUNTIME_TRICKS = {
    "exec_zlib_base64": "import base64, zlib\nexec(zlib.decompress(base64.b64decode({p!r})))\n",
    "compile_then_exec": "import base64 as b, zlib as z\n_code = z.decompress(b.b64decode({p!r}))\n"
                         "exec(compile(_code, 'masks', 'exec'))\n",
    "eval_of_a_name": "e = eval\nimport zlib, base64\n"
                      "e(compile(zlib.decompress(base64.b64decode({p!r})), 'm', 'exec'))\n",
    "builtins_by_getattr": "import zlib, base64\ngetattr(__builtins__, 'ex' + 'ec')(zlib.decompress("
                           "base64.b64decode({p!r})))\n",
    "codecs_rot13": "import codecs\nexec(codecs.decode({r!r}, 'rot13'))\n",
    "marshal": "import marshal, zlib, base64\nexec(marshal.loads(zlib.decompress(base64.b64decode({p!r}))))\n",
    "importlib_computed": "import importlib\nglobals().update(vars(importlib.import_module('_' + 'hidden')))\n",
    "dunder_import": "_m = __import__('z' + 'lib')\n",
    "pickle": "import pickle\nf = pickle.loads(b'')\n",
    "function_type": "def f():\n    pass\nf.__code__ = f.__code__.replace(co_consts=())\n",
    "timeit_runs_a_string": "import timeit\ntimeit.timeit({r!r}, number=1)\n",
    "unpickling_a_helper": "import numpy as np\nf = np.load('_blob.py', allow_pickle=True)\n",
    "pydoc_locate": "import pydoc\nf = pydoc.locate('_mine.causal_mask')\n",
    # Library functions that evaluate a string, or import what a string names (a hostile round: each imported or ran
    # a copy the report neither compared nor flagged, and the copy scored full marks).
    "string_annotation_imports": "import typing\ndef _h(x: \"__import__('_mine', globals(), None, ['f'], 1)\"): pass\n"
                                 "_m = typing.get_type_hints(_h)['x']\n",
    "annotations_of_xored_data": "import typing as t\n_D = b'bdo`'\ndef _h(x): pass\n_h.__annotations__"
                                 "  = {{'x': bytes(b ^ 7 for b in _D).decode()}}\n"
                                 "t.get_type_hints(_h)\n",
    "star_typing": "from typing import *  # noqa: F403\n",
    "singledispatch_register": "from functools import singledispatch\n@singledispatch\ndef g(x): pass\n"
                               "@g.register\ndef _(x: '__import__(\"_mine\")'): pass\n",
    "mock_patch_getter": "from unittest import mock\n_m = mock.patch('_mine.x').getter()\n",
    "logging_dict_config": "import logging.config as lc\n"
                           "lc.dictConfig({{'version': 1, 'handlers': {{'h': {{'()': '_mine.f'}}}}}})\n",
    "formatter_get_field": "import string\n"
                           "x = string.Formatter().get_field('0.__globals__[__builtins__]', (len,), {{}})\n",
    "warnings_category": "import warnings\nC = warnings._getcategory('_mine.W')\n",
    # exec reached as an attribute of the builtins module (a builtin function's __self__), on text the report does
    # not decode (a hostile round: three such copies were neither compared nor flagged)
    "exec_by_a_builtins_self": "print.__self__.exec(bytes({i!r}).decode())\n",
    "eval_by_a_builtins_self": "len.__self__.eval(compile(bytes({i!r}).decode(), 'm', 'exec'))\n",
    "compile_off_the_builtins": "import builtins as b\nb.exec(b.compile(bytes({i!r}).decode(), 'm', 'exec'))\n",
    "reflection_to_the_builtins": "B = ().__class__.__base__\n",
}


DECODED = {"exec_zlib_base64", "compile_then_exec", "eval_of_a_name", "builtins_by_getattr", "codecs_rot13"}


@pytest.mark.parametrize("trick", sorted(RUNTIME_TRICKS))
def test_code_built_at_run_time_is_flagged(tmp_path: Path, trick: str) -> None:
    import codecs

    from grader.grading.graded_source import graded_source

    alice = fill(ALICE)
    (tmp_path / "masks.py").write_text(RUNTIME_TRICKS[trick].format(
        p=payload(alice), r=codecs.encode(alice, "rot13"), i=list(alice.encode())), encoding="utf-8")
    source = graded_source(tmp_path, "masks.py")
    assert source.built, f"{trick}: nothing flagged"
    if trick in DECODED:  # constant data: what it decodes to is compared too
        assert alice in source.text, f"{trick}: the decoded copy is not compared"
    assert all(line.startswith("masks.py line ") for line in source.built), source.built


def test_honest_modules_and_the_kits_own_are_not_flagged(tmp_path: Path) -> None:
    from grader.curriculum import load
    from grader.grading.graded_source import graded_source, runs_with

    everyday = ("from types import SimpleNamespace\nimport re\nfrom re import compile\nPATTERN = compile('a')\n"
                "WORD = re.compile(r'\\w+')\n"
                "import logging\nimport warnings\nfrom typing import Optional\n"
                "def h(x: 'np.ndarray', y: 'Optional[list[int]]' = None) -> 'np.ndarray': return x\n")
    for name, text in (("alice", fill(ALICE)), ("carol", fill(CAROL)), ("dave", everyday + fill(CAROL))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "masks.py").write_text(text, encoding="utf-8")
        assert graded_source(tmp_path / name, "masks.py").built == [], name
    for folder in ("exercises", "solutions"):
        for exercise in load().exercises:
            source = graded_source(ROOT / folder, exercise.module_file, runs_with(exercise.name))
            assert source.built == [] and source.skipped == [], (folder, exercise.name, source)


@needs_copydetect
def test_the_report_compares_what_the_module_runs_and_flags_what_it_builds(tmp_path: Path) -> None:
    """Code moved to private helpers (two hops) or decoded at run time is compared; an undecodable module is
    skipped with a line, and the report is still written."""
    alice = fill(ALICE)
    subs = tmp_path / "subs"
    write_module(subs / "alice", alice)
    write_module(subs / "carol", fill(CAROL))
    write_module(subs / "bob", "from ._mine import *  # noqa: F403\n")
    (subs / "bob" / "_mine.py").write_text("from _deeper import *  # noqa: F403\n", encoding="utf-8")
    (subs / "bob" / "_deeper.py").write_text(bob_from_alice(alice), encoding="utf-8")
    write_module(subs / "hugo", RUNTIME_TRICKS["exec_zlib_base64"].format(p=payload(bob_from_alice(alice))))
    write_module(subs / "ivan", "x = 1\n")
    (subs / "ivan" / "masks.py").write_bytes(b"# -*- coding: utf-7 -*-\nx = '+2D0-'\n")  # a lone surrogate
    write_module(subs / "judy", fill(CAROL).replace("import numpy as np", "import numpy as np\nfrom ._x import y"))
    (subs / "judy" / "_x.py").write_bytes(b"# -*- coding: utf-7 -*-\ny = '+2D0-'\n")
    out = tmp_path / "out"
    lines: list[str] = []
    assert similarity.similarity_report(subs, out, exercises=["masks"], echo=lines.append, html_reports=False) == 0
    pairs = {frozenset((row["student"], row["other"])): float(row["score"])
             for row in rows(out / "similarity.csv") if row["table"] == "pair"}
    assert pairs.get(frozenset(("alice", "bob")), 0) >= 0.9, pairs  # moved into _deeper.py through _mine.py
    assert pairs.get(frozenset(("alice", "hugo")), 0) >= 0.9, pairs  # exec of a compressed copy
    status = {row["student"]: row["status"] for row in rows(out / "submissions.csv")}
    assert "masks: code built at run time: review by hand" in status["hugo"], status
    assert "not readable as Python source" in status["ivan"] and "masks.py" in status["ivan"], status
    assert "masks: _x.py is not readable as Python source" in status["judy"], status
    report = (out / "similarity.md").read_text(encoding="utf-8")
    assert "Code built at run time: review by hand" in report and "masks.py line 2: exec" in report, report
    assert "- hugo: " in report, report
    assert "bob:" not in report.split("## Submissions")[0], "moving code to a helper is not building it at run time"


@needs_copydetect
def test_markdown_from_an_id_is_shown_not_followed(tmp_path: Path) -> None:
    mistune = pytest.importorskip("mistune")
    subs = tmp_path / "subs"
    evil = "[click](http:evil.example) <img src=x onerror=alert(1)> www.evil.example"
    write_module(subs / evil, fill(ALICE))
    write_module(subs / "bob", bob_from_alice(fill(ALICE)))
    out = tmp_path / "out"
    assert similarity.similarity_report(subs, out, exercises=["masks"], echo=lambda line: None,
                                        html_reports=False) == 0
    page = mistune.create_markdown(plugins=["table", "url"])((out / "similarity.md").read_text(encoding="utf-8"))
    assert "[click](http:evil.example)" in page and "<img" not in page, page  # shown as text, not followed
    assert set(re.findall(r'<a href="([^"]*)"', page)) == {"html/masks.html", "html/masks-reference.html"}, page


def test_a_helper_imported_by_a_string_annotation_is_compared(tmp_path: Path) -> None:
    """A hostile round: ``typing.get_type_hints`` evaluated a string annotation that imported ``_c.py`` (a copy of a
    classmate's module), which no import statement names: the copy scored 12/12 and the report showed nothing."""
    from grader.grading.graded_source import graded_source

    write_module(tmp_path / "s", STUB + "\nimport typing as _t\n"
                 "def _h(x: \"__import__('_c', globals(), None, ['causal_mask'], 1)\"): pass\n"
                 "_m = _t.get_type_hints(_h)['x']\ncausal_mask = _m.causal_mask\n")
    (tmp_path / "s" / "_c.py").write_text(fill(ALICE), encoding="utf-8")
    source = graded_source(tmp_path / "s", "masks.py")
    assert "_c.py" in source.files and fill(ALICE) in source.text, source.files
    assert any("string annotation" in line for line in source.built), source.built
    assert any(line.endswith("get_type_hints") for line in source.built), source.built


def test_every_private_helper_is_compared_even_with_nothing_flagged(tmp_path: Path) -> None:
    """The list of run-time uses is a list: a library function it does not name can import ``_c.py`` from a string
    (a hostile round found seven). Every private helper a submission holds is compared, flagged or not, so that a
    classmate's copy in one is paired whatever loads it."""
    from grader.grading.graded_source import graded_source

    write_module(tmp_path / "s", STUB + "\nimport json\ncausal_mask = json.loads('null')\n")
    (tmp_path / "s" / "_c.py").write_text(fill(ALICE), encoding="utf-8")
    source = graded_source(tmp_path / "s", "masks.py")
    assert source.built == [], source.built
    assert "_c.py" in source.files and fill(ALICE) in source.text, source.files


def test_helpers_that_code_built_at_run_time_may_run_are_read_too(tmp_path: Path) -> None:
    from grader.grading.graded_source import graded_source

    write_module(tmp_path / "s", "exec(open(__file__.replace('masks', '_mine')).read())\n")
    (tmp_path / "s" / "_mine.py").write_text(fill(ALICE), encoding="utf-8")
    source = graded_source(tmp_path / "s", "masks.py")
    assert source.files == ["masks.py", "_mine.py"] and source.built == ["masks.py line 1: exec"], source


def test_code_moved_to_an_exercise_it_does_not_depend_on_is_read_too(tmp_path: Path) -> None:
    from grader.grading.graded_source import graded_source, runs_with

    # masks does not depend on tokenization: grading runs the student's tokenization.py when masks.py imports it.
    write_module(tmp_path / "s", "from .tokenization import *  # noqa: F403\n")
    (tmp_path / "s" / "tokenization.py").write_text(fill(ALICE), encoding="utf-8")
    source = graded_source(tmp_path / "s", "masks.py", runs_with("masks"))
    assert source.files == ["masks.py", "tokenization.py"] and fill(ALICE) in source.text, source.files
    assert "softmax" not in runs_with("attention"), "a dependency is served by the reference: not the student's"


def test_decoding_constant_data_is_bounded(tmp_path: Path) -> None:
    """Many decompression bombs in one module: none is decoded past the limit, and reading stays quick."""
    import base64
    import time
    import zlib

    from grader.grading.graded_source import MAX_DECODED, graded_source

    bomb = base64.b64encode(zlib.compress(b"x = 1\n" * (2 * MAX_DECODED))).decode("ascii")
    calls = "".join("exec(zlib.decompress(base64.b64decode(B)))\n" for _ in range(300))
    write_module(tmp_path / "s", f"import base64, zlib\nB = {bomb!r}\n{calls}")
    start = time.process_time()  # CPU time: the wall time is the machine's load
    source = graded_source(tmp_path / "s", "masks.py")
    assert time.process_time() - start < 5 and len(source.text) < 2 * MAX_DECODED, len(source.text)
    assert any(line.endswith(": exec") for line in source.built), source.built[:3]


def test_a_codec_named_by_a_student_is_bounded_or_not_decoded(tmp_path: Path) -> None:
    import zlib

    from grader.grading.graded_source import MAX_DECODED, graded_source

    bomb = zlib.compress(b"x = 1\n" * (4 * MAX_DECODED))
    write_module(tmp_path / "s", f"import codecs\nexec(codecs.decode({bomb!r}, 'zlib'))\n"
                                 f"exec({bomb!r}.decode('zlib'))\n")
    import tracemalloc

    tracemalloc.start()
    try:
        source = graded_source(tmp_path / "s", "masks.py")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "x = 1\nx = 1" not in source.text and len(source.built) == 3, source.built
    assert peak < 4 * MAX_DECODED, f"{peak} bytes to read a {len(bomb)}-byte bomb"


@needs_copydetect
def test_the_docs_example_is_what_the_command_prints(batch: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """docs/grading.md shows a real run on this class: the same command prints the same lines today."""
    text = (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- checked:similarity -->\n```console\n\$ attention-kit (.+?)\n(.*?)```\n"
                      r"<!-- end checked -->", text, re.S)
    assert block, "docs/grading.md lost its similarity example (<!-- checked:similarity -->)"
    arguments = block[1].split()
    assert arguments[:4] == ["similarity", "submissions/", "--out", "similarity/"], arguments
    out = tmp_path / "similarity"
    assert cli.main(["similarity", str(batch), "--out", str(out), *arguments[4:]]) == 0
    printed = capsys.readouterr().out.replace(str(batch), "submissions").replace(str(out), "similarity")
    printed = re.sub(r" \(\d+(\.\d+)? s\)$", "", printed, flags=re.M)  # its timing: not a figure of the docs
    assert "\n".join(line.rstrip() for line in printed.strip().splitlines()) == block[2].strip(), \
        "docs/grading.md's similarity example is stale: paste what this command prints (without its timing)"


def test_a_module_copied_from_the_given_code_is_close_to_the_kit(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # The kit's given attention is working code, written apart from the reference, that a student's worker runs
    # under fair grading (and a submission could carry out in its messages): a copy of it was listed nowhere; now
    # it is as close to the kit as a copy of the reference.
    from grader.sandbox import given

    where = given.folder()
    assert where is not None, "the checkout's given code is needed here (grader/release_files/given)"
    subs = tmp_path / "subs"
    for student, text in (("copier", (where / "attention.py").read_text(encoding="utf-8")),
                          ("starter", (ROOT / "exercises" / "attention.py").read_text(encoding="utf-8"))):
        (subs / student).mkdir(parents=True)
        (subs / student / "attention.py").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    status = cli.main(["similarity", str(subs), "--out", str(out), "--exercise", "attention", "--part", "all"])
    assert status == 0, capsys.readouterr().out
    closest = [row for row in rows(out / "similarity.csv") if row["table"] == "reference"]
    assert [row["student"] for row in closest] == ["copier"] and float(closest[0]["score"]) >= 0.9, closest
