"""The reading, docs/reading.md: its anchors exist, and everything that points at it lands on one."""

from __future__ import annotations

import ast
import re

from grader.curriculum import ROOT, kit_manifest, load

READING = ROOT / "docs" / "reading.md"
# Other files reference these ids; renaming one breaks their links, so they are pinned here.
SECTIONS = ("embeddings", "projections", "attention", "scaling", "masks", "order", "multihead", "layer",
            "worked-example", "gradients", "training", "explanation", "generation", "meaning",
            "context-use", "retrieval", "tokenization")
REFERENCE = re.compile(r"docs/reading\.md#([\w-]+)")


def anchors() -> list[str]:
    return re.findall(r'^<a id="([\w-]+)"></a>$', READING.read_text(encoding="utf-8"), flags=re.MULTILINE)


def test_sections_have_their_anchors_in_order_each_before_its_heading():
    assert anchors() == list(SECTIONS)
    lines = READING.read_text(encoding="utf-8").splitlines()
    for number, section in enumerate(SECTIONS, start=1):
        after = lines[lines.index(f'<a id="{section}"></a>') + 1]
        assert after.startswith(f"## {number}. "), f"anchor {section!r} is followed by {after!r}, not heading {number}"


def test_links_inside_the_reading_land_on_an_anchor():
    targets = re.findall(r"\]\(#([\w-]+)\)", READING.read_text(encoding="utf-8"))
    assert targets, "the reading links none of its own sections"
    assert set(targets) <= set(anchors()), sorted(set(targets) - set(anchors()))


def test_every_manifest_reading_id_is_a_section():
    for exercise in load().exercises:
        assert exercise.reading, f"exercise {exercise.name} names no section of the reading"
        missing = set(exercise.reading) - set(SECTIONS)
        assert not missing, f"exercise {exercise.name}: reading = {sorted(missing)} are not sections of {READING.name}"


def test_every_function_reading_is_a_section_of_its_exercise_for_one_of_its_functions():
    for exercise in load().exercises:
        for function, section in exercise.function_reading:
            assert function in exercise.functions, f"exercise {exercise.name}: {function} is not one of its functions"
            assert section in exercise.reading, f"exercise {exercise.name}: {section!r} is not in its reading"
            assert exercise.reading_of(function) == section
        assert exercise.reading_of("no such function") == exercise.reading[0]


def test_every_reference_to_the_reading_lands_on_a_section():
    files = [*ROOT.glob("solutions/*.py"), *ROOT.glob("exercises/*.py"), *ROOT.glob("tests/*.py"),
             *ROOT.glob("grader/**/*.py"), *ROOT.glob("grader/**/*.toml"), *ROOT.glob("docs/*.md"),
             ROOT / "README.md"]
    found = {}
    for path in files:
        for section in REFERENCE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(section, []).append(path.relative_to(ROOT).as_posix())
    assert found, "nothing points at docs/reading.md"
    broken = {section: paths for section, paths in found.items() if section not in SECTIONS}
    assert not broken, f"references to sections the reading does not have: {broken}"


def test_each_exercise_module_names_its_sections():
    for exercise in load().exercises:
        source = (ROOT / "solutions" / exercise.module_file).read_text(encoding="utf-8")
        named = set(REFERENCE.findall(ast.get_docstring(ast.parse(source)) or ""))
        missing = set(exercise.reading) - named
        assert not missing, (f"the docstring of solutions/{exercise.module_file} does not point at "
                             f"{', '.join(f'docs/reading.md#{s}' for s in sorted(missing))} (the manifest's reading)")


def test_the_release_ships_the_reading():
    from grader.authoring import release

    assert "docs/reading.md" in release.plan_release().paths()


def test_the_reading_names_no_instructor_file_or_option():
    # Students get the reading in the release: solutions/, benchmarks/ and demo --reference are not theirs.
    text = READING.read_text(encoding="utf-8")
    found = sorted(set(re.findall(r"solutions/[\w./]*|benchmarks/[\w./]*|--reference\b", text)))
    assert not found, f"{READING.name} names instructor material students do not have: {found}"


def test_the_table_of_exercises_lists_every_exercise_of_the_manifest_with_its_sections():
    # | 12. negation (Part III) | `exercises/negation.py` | [Context changes the meaning](#meaning) |
    row = re.compile(r"^\| (\d+)\. (\w+)(?: \(Part (\w+)\))? \| `exercises/(\w+)\.py` \| (.+) \|$", flags=re.MULTILINE)
    rows = row.findall(READING.read_text(encoding="utf-8").split("\n## ", 1)[0])
    curriculum = kit_manifest()  # the kit's reading lists the kit's exercises, whatever course is active
    assert [(int(number), name) for number, name, *_ in rows] == [
        (exercise.number, exercise.name) for exercise in curriculum.exercises]
    numerals = ("I", "II", "III", "IV", "V", "VI")
    for (_, name, part, module, read), exercise in zip(rows, curriculum.exercises, strict=True):
        assert module == name, f"exercise {name}: the table names exercises/{module}.py"
        assert part == ("" if exercise.part == 1 else numerals[exercise.part - 1]), f"exercise {name}: Part {part!r}"
        linked = re.findall(r"\]\(#([\w-]+)\)", read)
        assert set(exercise.reading) <= set(linked), f"exercise {name}: the table links {linked}, not all of " \
                                                     f"{exercise.reading}"
