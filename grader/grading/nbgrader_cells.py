"""nbgrader's ``OverwriteCells`` without a false "checksum has changed" warning, and its feedback without hidden tests.

``nbgrader generate_assignment`` saves each locked cell, and its checksum,
with the hidden tests still in it, then removes them from the students'
copy. ``nbgrader autograde`` compares that checksum with the student's cell,
which never had them, so it warns that every hidden-test cell changed
(jupyter/nbgrader#1961) before putting the saved source back. The warning
hides a real one: a student who edited a test cell looks like everyone else.

This subclass first gives back the hidden tests to a cell that is exactly the
saved cell with them removed (the students' copy, untouched); nbgrader's own
check then finds the checksum unchanged. Any other difference is left to
nbgrader, which warns and restores the cell as before. The course built by
``attention-kit notebooks`` uses it (its ``nbgrader_config.py``); it needs
nbgrader, which is imported only here.
"""

from __future__ import annotations

from typing import Any

import nbformat
from nbgrader import utils
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from nbgrader.preprocessors import OverwriteCells as _NbgraderOverwriteCells

from grader.grading.notebook_reader import MARKS

# How nbgrader_config.py names this class (nbconvert imports preprocessors given as strings).
IMPORT_NAME = f"{__name__}.OverwriteCells"


class OverwriteCells(_NbgraderOverwriteCells):
    """nbgrader's ``OverwriteCells`` that first gives every released cell its released metadata back.

    A student's notebook can hold nbgrader metadata that names no cell of the release: a cell copied and pasted
    (Jupyter copies its metadata; nbgrader's ``DeduplicateIds`` then empties the earlier copy's), an id made up,
    an entry left half-filled. nbgrader leaves such metadata half-empty and stops on it (``KeyError:
    'grade_id'``, or "an old version of the metadata format"), so the whole notebook got no grade and ``nbgrader
    export`` wrote 0. Such a cell is a plain cell here, as ``attention-kit grade`` reads it. A released cell whose
    kind a student changed (``grade: false`` on a test cell, ``solution: true``, other points) gets the release's
    back before nbgrader compares checksums, which nbgrader's own step does not restore and then cannot match.
    """

    def preprocess_cell(self, cell: Any, resources: Any, cell_index: int) -> tuple[Any, Any]:
        """Give the cell its released metadata; put the saved source back where only the hidden tests differ."""
        meta = cell.metadata.get("nbgrader")
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if meta is not None and not (isinstance(grade_id, str) and self._released_metadata(cell, grade_id)):
            del cell.metadata["nbgrader"]  # names no cell of the release: a plain cell
            return cell, resources
        if grade_id is not None and utils.is_locked(cell):
            try:
                saved = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                saved = None  # nbgrader reports it
            if saved is not None and saved.source != cell.source and self._released(saved.source) == cell.source:
                cell.source = saved.source
        return super().preprocess_cell(cell, resources, cell_index)

    def _released_metadata(self, cell: Any, grade_id: str) -> bool:
        """Write the release's nbgrader metadata of ``grade_id`` into ``cell`` (False: the release has none)."""
        from nbgrader.nbgraderformat import SCHEMA_VERSION

        notebook, assignment, book = self.notebook_id, self.assignment_id, self.gradebook
        try:
            released = book.find_source_cell(grade_id, notebook, assignment)
        except MissingEntry:
            return False
        meta = {"grade_id": grade_id, "locked": bool(released.locked), "schema_version": SCHEMA_VERSION}
        for kind, find in (("grade", book.find_grade_cell), ("solution", book.find_solution_cell),
                           ("task", book.find_task_cell)):
            try:
                found = find(grade_id, notebook, assignment)
            except MissingEntry:
                meta[kind] = False
                continue
            meta[kind] = True
            if kind in ("grade", "task"):
                meta["points"] = float(found.max_score)
        cell.metadata["nbgrader"] = meta
        return True

    def _released(self, source: str) -> str:
        """``source`` as generate_assignment released it: nbgrader's own removal of the hidden tests."""
        cell = nbformat.v4.new_code_cell(source)
        ClearHiddenTests(config=self.config)._remove_hidden_test_region(cell)
        return cell.source


    def add_missing_grade_cells(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        """nbgrader's: each released test cell a student deleted comes back after the cell released before it.

        nbgrader's own looks that cell up among the submitted ones and stopped (``KeyError``, the notebook not
        graded, 0 exported) where the student had deleted it too (an exercise's answer cell and its first test
        cell: a hostile round); ``attention-kit grade`` graded the rest. The cell comes back after the nearest
        released cell still there instead, or first.
        """
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source.source_cells]
        solutions = {cell.name for cell in source.solution_cells}
        for grade_cell in sorted(source.grade_cells, key=lambda cell: order.index(cell.name)):
            present = {cell["metadata"]["nbgrader"]["grade_id"]: index for index, cell in enumerate(nb.cells)
                       if utils.is_grade(cell) or utils.is_solution(cell)}
            if grade_cell.name in present:
                continue
            self.log.warning(f"Missing grade cell {grade_cell.name} encountered, adding to notebook")
            position = order.index(grade_cell.name)
            added = self.missing_cell_transform(source.source_cells[position], grade_cell.max_score,
                                                is_solution=grade_cell.name in solutions)
            after = next((present[name] for name in reversed(order[:position]) if name in present), -1)
            nb.cells.insert(after + 1, added)
        return nb, resources


class HalfFilledIds(NbGraderPreprocessor):
    """Before nbgrader's ``DeduplicateIds``: metadata that marks a cell but names none, or marks nothing, is off.

    A cell marked as an answer, a test or locked without a ``grade_id`` (an entry left half-filled) stopped
    nbgrader's ``DeduplicateIds`` (``KeyError: 'grade_id'``: the notebook not graded, 0 exported), where
    ``attention-kit grade`` reads it as a plain cell (``notebook_reader``); here it is a plain cell too. A cell
    with a released ``grade_id`` and no flag set (``DeduplicateIds`` passes it over) got the released metadata
    back from ``OverwriteCells``: beside the released cell, nbgrader then stopped on the "Duplicate grade id"
    (a hostile round); it is a plain cell in both graders, every released cell having a flag set.
    """

    def preprocess_cell(self, cell: Any, resources: Any, cell_index: int) -> tuple[Any, Any]:
        """Take off the cell's nbgrader metadata if it marks the cell without a grade_id, or marks nothing."""
        meta = cell.metadata.get("nbgrader")
        if isinstance(meta, dict) and (not any(meta.get(flag) for flag in MARKS)
                                       or not (isinstance(meta.get("grade_id"), str) and meta["grade_id"])):
            del cell.metadata["nbgrader"]
        return cell, resources


def sanitize_preprocessors() -> list[Any]:
    """The autograde steps that prepare a submission: nbgrader's own, this module's ``OverwriteCells`` for its.

    :class:`HalfFilledIds` comes first (before nbgrader's ``DeduplicateIds``, which stops on what it clears).
    """
    from nbgrader.converters.autograde import Autograde

    defaults = Autograde.class_traits()["sanitize_preprocessors"].default()
    return [f"{__name__}.HalfFilledIds",
            *(IMPORT_NAME if step is _NbgraderOverwriteCells else step for step in defaults)]


def feedback_exporter() -> type:
    """The HTMLExporter of generate_feedback: Markdown links and images keep safe protocols only.

    SanitizeHTML cleans a Markdown cell's source as HTML, but link syntax (``[hint](javascript:...)``, a reference
    definition, an entity-encoded scheme) becomes HTML after it, when the page is rendered, by a mistune renderer
    that nbconvert makes with harmful protocols allowed. This exporter renders Markdown as nbconvert's does, with
    mistune's own protocol check on: such a link points nowhere (``#harmful-link``).
    """
    from jinja2 import pass_context
    from nbconvert.exporters import HTMLExporter
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    class FeedbackExporter(HTMLExporter):
        """HTMLExporter with mistune's protocol check on for Markdown cells."""

        @pass_context
        def markdown2html(self, context: Any, source: str) -> str:
            cell = context.get("cell", {})
            renderer = IPythonRenderer(
                escape=False, allow_harmful_protocols=False, attachments=cell.get("attachments", {}),
                embed_images=self.embed_images, path=context.get("resources", {}).get("metadata", {}).get("path", ""),
                anchor_link_text=self.anchor_link_text, exclude_anchor_links=self.exclude_anchor_links,
                **self.lexer_options)
            return MarkdownWithMath(renderer=renderer).render(source)

    return FeedbackExporter


def feedback_preprocessors() -> list[Any]:
    """The generate_feedback steps: nbgrader's own, with its ``ClearHiddenTests`` before the page is made.

    The autograded notebook keeps the hidden tests' source (the instructor's copy); the feedback a student gets
    shows each hidden test cell as it was released (its comment line) with its outcome, never the test's name
    nor the course folder's path that the source names; and the page it makes runs no script a student wrote.
    """
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    from nbgrader.converters.generate_feedback import GenerateFeedback
    from traitlets import Bool

    defaults = GenerateFeedback.class_traits()["preprocessors"].default()
    # nbgrader's feedback template renders Markdown cells without nbconvert's sanitize_html: nbconvert's own
    # SanitizeHTML escapes a student's <script> or <img onerror> in them (and in raw cells and HTML outputs).
    # It is off unless enabled, like any nbconvert preprocessor that is not nbgrader's.
    sanitize = type("SanitizeFeedback", (SanitizeHTML,), {"enabled": Bool(True).tag(config=True)})
    return [ClearHiddenTests, sanitize, *defaults]
