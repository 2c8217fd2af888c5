"""What a submission's exercise module runs, as text: the input of ``attention-kit similarity``.

Grading imports ``<exercise>.py`` with every module of the submission it
imports: the private helpers (``_name.py``, the only other files a submission
keeps) and the modules of exercises it does not depend on (those it depends
on are served by the reference). :func:`graded_source` reads the exercise
module and, following its imports with the ast (``import _mine``, ``from
._mine import f``, ``from . import _mine``, ``importlib.import_module("_mine")``,
transitively), every such module, so that code moved out of the exercise's
own file is compared all the same. Every private helper the submission holds
is compared too, imported or not: a library function can import one from a
string, and no list of such functions is complete.

Code built at run time cannot be read: ``exec``/``eval``/``compile``, the
import machinery (``__import__``, ``importlib``, ``runpy``, ``sys.modules``),
decoders and loaders of data (``marshal``, ``pickle``, ``base64``, ``zlib``,
``codecs``, ...), reflection that reaches them (``__builtins__``,
``__globals__``, ``__code__``, ``getattr`` of a computed name, ...). Each use
is listed (:attr:`GradedSource.built`) for the instructor to review by hand.
Where such data is a constant of the module (``exec(zlib.decompress(
base64.b64decode("...")))``), it is decoded here as well, within a size
limit, and what it decodes to is compared with the rest. Nothing is ever run.

A module that Python would not read as text (its coding declaration names a
codec that gives lone surrogates, a NUL byte, an unknown codec) is left out
with one line (:attr:`GradedSource.skipped`), never stopping the report.
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import codecs
import io
import lzma
import sys
import tokenize
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT, reference_dir
from grader.curriculum import load as load_curriculum
from grader.sandbox import given

# Modules whose only use in an exercise would be to build or load code at run time.
RUNTIME_MODULES = frozenset({
    "marshal", "pickle", "cPickle", "_pickle", "shelve", "dill", "cloudpickle", "copyreg", "base64", "binascii",
    "zlib", "gzip", "bz2", "lzma", "zipfile", "tarfile", "zipimport", "codecs", "encodings", "importlib", "imp",
    "runpy", "pkgutil", "ctypes", "cffi", "builtins", "__builtin__", "code", "codeop", "subprocess",
    "py_compile", "compileall", "timeit", "doctest", "pdb", "bdb", "profile", "cProfile", "trace",
    "multiprocessing", "concurrent", "pty", "site", "pydoc", "tempfile",
})
# Names whose use builds or reaches code at run time, whatever they are called with.
RUNTIME_NAMES = frozenset({"exec", "eval", "compile", "execfile", "__import__", "__builtins__", "globals", "locals",
                           "vars", "breakpoint", "__loader__", "__spec__"})
# Attributes that reach code objects, namespaces or the import machinery.
RUNTIME_ATTRIBUTES = frozenset({
    "__code__", "__globals__", "__builtins__", "__subclasses__", "__import__", "__loader__", "__spec__",
    "__getattribute__", "__closure__", "__dict__", "__reduce__", "__reduce_ex__", "__setstate__",
    "f_globals", "f_locals", "f_builtins", "f_back", "gi_frame", "tb_frame", "co_code", "exec_module",
    "load_module", "find_spec", "module_from_spec", "spec_from_loader", "spec_from_file_location",
    "import_module", "modules", "meta_path", "path_hooks", "path_importer_cache", "_getframe", "settrace",
    "setprofile", "system", "popen", "execv", "execve", "execl", "execvp", "spawnv", "startfile", "read_pickle",
    "run_path", "run_module", "safe_eval", "exec_command", "CodeType", "FunctionType", "LambdaType", "ModuleType",
    "MethodType",
    # exec and eval reached as attributes (``print.__self__.exec``: a builtin function's __self__ is the builtins
    # module), and the reflection that reaches them: a copy hidden this way read as no code at all
    "exec", "eval", "execfile", "__self__", "__objclass__", "__base__", "__bases__", "__mro__",
})
# ``compile`` as an attribute is the builtin's only off these modules (``re.compile`` is a pattern).
PATTERN_MODULES = frozenset({"re", "regex", "fnmatch"})
# Library functions that evaluate a string as code, or import a module named by a string (a string annotation is
# an expression: ``typing.get_type_hints`` evals it, ``singledispatch``'s ``register`` calls that; ``mock.patch``,
# ``pkgutil.resolve_name``, ``logging.config`` and ``warnings`` import what a string names): flagged as names,
# attributes, imported names and strings alike.
EVALUATING = frozenset({
    "get_type_hints", "get_annotations", "ForwardRef", "_evaluate", "_eval_type", "evaluate_forward_ref",
    "__annotations__", "__annotate__", "resolve_name", "dictConfig", "fileConfig", "_getcategory", "get_field",
    "_importer", "_get_target", "_dot_lookup", "singledispatch", "singledispatchmethod",
})
# Submodules whose only use would be that (their package is an everyday one: logging, unittest's asserts).
RUNTIME_SUBMODULES = frozenset({"logging.config", "unittest.mock", "xmlrpc.server"})
# Loaders that run code when their data says so (unpickling): flagged where the call asks for it.
UNPICKLING_KEYWORDS = {"allow_pickle": True, "weights_only": False}
# Calls that take an attribute or module name: a computed one may be any of the above.
NAME_TAKING = frozenset({"getattr", "setattr", "delattr", "attrgetter", "methodcaller", "import_module",
                         "__import__"})
# Constant data is decoded at most this far (a zip bomb stops here), and at most this deep.
MAX_DECODED = 1_000_000
MAX_DEPTH = 4
MODULE_BUDGET = 8 * MAX_DECODED  # what all the decoders of one module may produce together
MAX_DECODED_TEXTS = 50  # texts decoded and read for one exercise, at most
BUILT = "code built at run time: review by hand"


@dataclass
class GradedSource:
    """The text of what an exercise module runs, and what of it could not be read.

    Attributes
    ----------
    text : str
        The exercise module, then each module it imports from the submission, then the text of constant data
        it decodes at run time, each part headed by a comment naming it.
    files : list of str
        The submission's modules that ``text`` holds, the exercise module first.
    built : list of str
        Where code is built at run time (``_mine.py line 3: exec``): to review by hand.
    skipped : list of str
        The modules left out, each with why (``_x.py: not readable as Python source (...)``).
    """

    text: str = ""
    files: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def read_source(path: Path) -> tuple[str | None, str]:
    """The source text of ``path`` decoded as Python decodes it (PEP 263), or None and why it cannot be.

    A text that UTF-8 cannot hold (a lone surrogate, which ``utf-7`` and ``surrogateescape`` give) is
    refused as well: it could not be compared, written or shown.
    """
    try:
        data = path.read_bytes()
    except OSError as error:
        return None, f"{path.name} cannot be read ({error.strerror or error})"
    if b"\x00" in data:
        return None, f"{path.name} is not text (it holds a NUL byte)"
    encoding = "utf-8"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError) as error:
        reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    except UnicodeDecodeError as error:
        reason = f"not valid {encoding}: byte {error.start}"
    else:
        try:
            text.encode("utf-8")
            return text, ""
        except UnicodeEncodeError as error:
            reason = f"its coding {encoding} gives a lone surrogate, character {error.start}"
    return None, f"{path.name} is not readable as Python source ({reason}): skipped"


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for an attribute chain on a name, else ``""``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


# ---------------------------------------------------------------- constant data decoded without running it


def _limited(decompressor: object, data: bytes) -> bytes:
    out = decompressor.decompress(data, MAX_DECODED + 1)  # type: ignore[attr-defined]
    if len(out) > MAX_DECODED:
        raise ValueError("decodes to too much")
    return out


def _zlib(data: bytes, wbits: int = zlib.MAX_WBITS) -> bytes:
    return _limited(zlib.decompressobj(wbits), data)


DECODERS = {
    "b64decode": base64.b64decode, "b32decode": base64.b32decode, "a85decode": base64.a85decode,
    "b85decode": base64.b85decode, "urlsafe_b64decode": base64.urlsafe_b64decode,
    "standard_b64decode": base64.standard_b64decode, "decodebytes": base64.decodebytes,
    "b16decode": lambda data: base64.b16decode(data, casefold=True), "a2b_base64": binascii.a2b_base64,
    "unhexlify": binascii.unhexlify, "a2b_hex": binascii.a2b_hex, "fromhex": lambda data: bytes.fromhex(data.decode()),
    "decompress": lambda data: _decompress(data),
}


def _decompress(data: bytes) -> bytes:
    """zlib, gzip, bz2 or lzma data, whichever it is (the caller's module name is not trusted)."""
    for attempt in (lambda: _zlib(data), lambda: _zlib(data, 31), lambda: _limited(bz2.BZ2Decompressor(), data),
                    lambda: _limited(lzma.LZMADecompressor(), data), lambda: _zlib(data, -zlib.MAX_WBITS)):
        try:
            return attempt()
        except (zlib.error, OSError, lzma.LZMAError, EOFError):
            continue
    raise ValueError("not compressed data")


# The bytes-to-bytes codecs a student may name, decoded here; the compressing ones within MAX_DECODED (_decompress).
BINARY_CODECS = frozenset({"rot-13", "base64", "hex", "uu", "quopri", "zlib", "bz2"})


def _codec(data: str | bytes, name: str, encode: bool) -> str | bytes:
    """``codecs.decode``/``encode`` and ``str.encode``/``bytes.decode`` with a named codec (rot13, base64, ...)."""
    info = codecs.lookup(name)
    name = info.name
    if not getattr(info, "_is_text_encoding", True) and name not in BINARY_CODECS:
        raise LookupError(f"{name}: not decoded here")
    if name in ("zlib", "bz2"):
        return _decompress(data if isinstance(data, bytes) else data.encode("latin-1")) if not encode else data
    return codecs.encode(data, name) if encode else codecs.decode(data, name)


class _Folder:
    """Evaluates constant expressions of decoders (no name lookup but the module's own constants).

    Each call is folded once (``memo``); what all of them decode together is at most ``budget[0]`` characters,
    the budget of the whole module: a module of many small bombs costs no more than one.
    """

    def __init__(self, constants: dict[str, str | bytes], budget: list[int]) -> None:
        self.constants, self.budget = constants, budget
        self.memo: dict[int, str | bytes | None] = {}

    def fold(self, node: ast.AST, depth: int = 0) -> str | bytes | None:  # noqa: PLR0911 - one case per form
        if depth > 30:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.fold(node.left, depth + 1), self.fold(node.right, depth + 1)
            if type(left) is type(right) and left is not None and len(left) + len(right) <= MAX_DECODED:
                return left + right  # type: ignore[operator]
            return None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            value = self.fold(node.value, depth + 1)
            step = node.slice.step
            if value is not None and node.slice.lower is None and node.slice.upper is None and isinstance(
                    step, ast.UnaryOp) and isinstance(step.op, ast.USub) and isinstance(step.operand, ast.Constant):
                return value[::-step.operand.value] if step.operand.value else None
            return None
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        return None

    def call(self, node: ast.Call, depth: int) -> str | bytes | None:
        if id(node) not in self.memo:
            result = self._call(node, depth) if self.budget[0] > 0 else None
            self.budget[0] -= len(result) if result is not None else 0
            self.memo[id(node)] = result if self.budget[0] >= 0 else None
        return self.memo[id(node)]

    def _call(self, node: ast.Call, depth: int) -> str | bytes | None:
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        arguments = [self.fold(argument, depth + 1) for argument in node.args]
        try:
            if name == "join" and isinstance(function, ast.Attribute) and len(node.args) == 1:
                glue = self.fold(function.value, depth + 1)
                items = node.args[0]
                if glue is None or not isinstance(items, ast.List | ast.Tuple):
                    return None
                parts = [self.fold(item, depth + 1) for item in items.elts]
                if not all(type(p) is type(glue) for p in parts):
                    return None
                return glue.join(parts) if sum(map(len, parts)) <= MAX_DECODED else None  # type: ignore[arg-type]
            if name in ("decode", "encode") and len(arguments) >= 2:  # codecs.decode(data, codec)
                data, codec = arguments[0], arguments[1]
                return None if data is None or not isinstance(codec, str) else _codec(data, codec, name == "encode")
            if name in ("decode", "encode") and isinstance(function, ast.Attribute):  # data.decode(codec)
                value = self.fold(function.value, depth + 1)
                codec = arguments[0] if arguments else "utf-8"
                if value is None or not isinstance(codec, str):
                    return None
                return _codec(value, codec, name == "encode")
            if name in DECODERS and arguments and arguments[0] is not None:
                data = arguments[0]
                result = DECODERS[name](data.encode("ascii") if isinstance(data, str) else data)
                return result if len(result) <= MAX_DECODED else None
        except (ValueError, TypeError, LookupError, binascii.Error, UnicodeError, zlib.error, OSError, EOFError,
                lzma.LZMAError, OverflowError, MemoryError):
            return None
        return None


def _constants(nodes: list[ast.AST], budget: list[int]) -> dict[str, str | bytes]:
    """The module's names bound (anywhere) to a constant expression of strings and decoders, by a plain ``=``."""
    constants: dict[str, str | bytes] = {}
    assignments = [node for node in nodes if isinstance(node, ast.Assign) and len(node.targets) == 1
                   and isinstance(node.targets[0], ast.Name)]
    for _ in range(3):  # a name defined from another: a few passes settle it
        folder = _Folder(constants, budget)
        for node in assignments:
            value = folder.fold(node.value)
            if value is not None:
                constants[node.targets[0].id] = value  # type: ignore[union-attr]
    return constants


def _as_text(data: str | bytes) -> str | None:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if "\x00" in data:
        return None
    try:
        data.encode("utf-8")
    except UnicodeError:
        return None
    return data


# ---------------------------------------------------------------- what a module runs


def _imports(nodes: list[ast.AST]) -> list[str]:
    """The top-level module names a module imports, statically or by a constant name (``import_module("_x")``)."""
    names: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                names.append(node.module.split(".")[0])
            elif node.level:
                names += [alias.name for alias in node.names]  # from . import _mine
        elif (isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.append(node.args[0].value.lstrip(".").split(".")[0])
    return names


def runtime_uses(nodes: list[ast.AST], filename: str) -> list[str]:
    """Where a module (``nodes``: its ast, walked) builds or reaches code at run time: ``name line N: what``."""
    found: dict[tuple[int, str], None] = {}
    # A name imported from an ordinary module (``from re import compile``) is that module's, not the builtin.
    imported = {alias.asname or alias.name for node in nodes if isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[0] not in RUNTIME_MODULES for alias in node.names}

    def add(node: ast.AST, what: str) -> None:
        found[(getattr(node, "lineno", 0), what)] = None

    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in RUNTIME_MODULES or module in RUNTIME_SUBMODULES:
                    add(node, f"imports {module}")
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in RUNTIME_SUBMODULES:
                        add(node, f"imports {node.module}.{alias.name}")
                    if alias.name in RUNTIME_ATTRIBUTES | EVALUATING or alias.name == "*" and (
                            node.module or "").split(".")[0] in ("sys", "os", "operator", "functools", "typing",
                                                                 "inspect", "string", "warnings", "logging",
                                                                 "unittest", "annotationlib"):
                        add(node, f"imports {alias.name} from {node.module}")
        elif isinstance(node, ast.Name) and (node.id in RUNTIME_NAMES and node.id not in imported
                                             or node.id in EVALUATING):
            add(node, node.id)
        elif isinstance(node, ast.Attribute) and (node.attr in RUNTIME_ATTRIBUTES | EVALUATING or node.attr == "compile"
                                                  and _dotted(node.value) not in PATTERN_MODULES):
            add(node, f"{_dotted(node) or '.' + node.attr}")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func).split(".")[-1] or getattr(node.func, "attr", "")
            for keyword in node.keywords:
                if keyword.arg in UNPICKLING_KEYWORDS and not (isinstance(keyword.value, ast.Constant) and
                                                               keyword.value.value != UNPICKLING_KEYWORDS[keyword.arg]):
                    add(node, f"{name} with {keyword.arg} (unpickling runs code)")
            if _dotted(node.func).endswith("torch.load") and "weights_only" not in {k.arg for k in node.keywords}:
                add(node, "torch.load (unpickling runs code)")
            if name in NAME_TAKING:
                named = node.args[1:2] if name in ("getattr", "setattr", "delattr") else node.args[:1]
                for argument in named:
                    value = argument.value if isinstance(argument, ast.Constant) else None
                    if not isinstance(value, str):
                        add(node, f"{name} of a computed name")
                    elif value in RUNTIME_NAMES | RUNTIME_ATTRIBUTES or value.split(".")[0] in RUNTIME_MODULES:
                        add(node, f"{name} of {value}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value in RUNTIME_ATTRIBUTES - {"modules", "system", "popen"} or node.value in RUNTIME_NAMES
                or node.value in EVALUATING):
            add(node, f"the name {node.value!r} as a string")
        if isinstance(node, ast.arg | ast.FunctionDef | ast.AsyncFunctionDef | ast.AnnAssign):
            annotation = node.returns if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else node.annotation
            if _code_in_annotation(annotation):
                add(node, "a string annotation that calls code (evaluated by typing.get_type_hints)")
    return [f"{filename} line {line}: {what}" for line, what in sorted(found)]


def _code_in_annotation(annotation: ast.AST | None) -> bool:
    """Whether a string annotation (anywhere in ``annotation``) is code that evaluating it would run.

    A call, a lambda or a name that builds code: ``"np.ndarray"`` and ``"list[int]"`` are not.
    """
    if annotation is None:
        return False
    for part in ast.walk(annotation):
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            try:
                inner = ast.parse(part.value.strip(), mode="eval")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for piece in ast.walk(inner):
                if isinstance(piece, ast.Call | ast.Lambda | ast.NamedExpr) or isinstance(piece, ast.Name) and (
                        piece.id in RUNTIME_NAMES | EVALUATING) or isinstance(piece, ast.Attribute) and (
                        piece.attr in RUNTIME_ATTRIBUTES | EVALUATING):
                    return True
    return False


def decoded_code(nodes: list[ast.AST]) -> list[tuple[int, str]]:
    """The code that the module's constant data decodes to (``zlib.decompress(base64.b64decode("..."))``).

    Only texts that are Python and that the module does not hold as they are (those are compared already);
    a text decoded through several calls is kept once, at its first line.
    """
    budget = [MODULE_BUDGET]
    folder = _Folder(_constants(nodes, budget), budget)
    literal = {node.value for node in nodes if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    found: dict[str, int] = {}
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func).split(".")[-1] or getattr(node.func, "attr", "")
        if name in ("exec", "eval", "compile"):
            value = folder.fold(node.args[0]) if node.args else None
        elif name in DECODERS or name in ("decode", "encode", "join"):
            value = folder.fold(node)
        else:
            continue
        text = _as_text(value) if value is not None else None
        if text and text not in literal and len(text.strip()) > 20 and _parse(text) is not None:
            found[text] = min(found.get(text, node.lineno), node.lineno)
    texts = sorted(found, key=len, reverse=True)
    kept = [text for index, text in enumerate(texts) if not any(text in longer for longer in texts[:index])]
    return sorted((found[text], text) for text in kept)


def _absent(stem: str, folder: Path) -> bool:
    """Whether ``stem`` is a private module that is neither in the submission nor Python's (written at run time?)."""
    return stem.startswith("_") and stem not in sys.stdlib_module_names and not (folder / f"{stem}.py").is_file()


def graded_source(folder: Path, module_file: str, others: frozenset[str] = frozenset(),
                  cache: dict[tuple[str, str], Any] | None = None) -> GradedSource:
    """What the exercise module ``folder/module_file`` runs, as one text (see the module's docstring).

    Parameters
    ----------
    folder : Path
        The submission's modules (as ``grader.grading.submissions`` copies them).
    module_file : str
        The exercise's module, e.g. ``masks.py``.
    others : frozenset of str
        The stems of the other modules of the submission that grading runs when imported (exercises the
        exercise does not depend on); the private helpers (``_name``) always are.
    cache : dict, optional
        What was learnt of each text read before (give the same dict for every exercise of one submission:
        a helper that several exercises import is analysed once).

    Returns
    -------
    GradedSource
        Empty ``text`` and ``files`` when the exercise module itself cannot be read (``skipped`` says why).
    """
    source = GradedSource()
    cache = {} if cache is None else cache
    pending, seen = [module_file], {module_file}
    parts: list[str] = []
    decoded_count = 0
    while pending:
        name = pending.pop(0)
        text, why = read_source(folder / name)
        if text is None:
            source.skipped.append(why)
            if name == module_file:
                return source
            continue
        source.files.append(name)
        parts.append(text if name == module_file else f"\n\n# ---- {name} (imported)\n{text}")
        texts = [(name, text, 0)]
        while texts:
            where, body, depth = texts.pop(0)
            key = (where, body)
            if key not in cache:
                tree = _parse(body)
                nodes = list(ast.walk(tree)) if tree is not None else []
                cache[key] = (runtime_uses(nodes, where), decoded_code(nodes), _imports(nodes))
            uses, decodes, imports = cache[key]
            source.built += uses
            if depth < MAX_DEPTH and decoded_count < MAX_DECODED_TEXTS:
                for line, decoded in decodes[:MAX_DECODED_TEXTS - decoded_count]:
                    decoded_count += 1
                    parts.append(f"\n\n# ---- {where} line {line}: decoded at run time\n{decoded}")
                    texts.append((f"{where} line {line} (decoded)", decoded, depth + 1))
            for stem in imports:
                candidate = f"{stem}.py"
                if _absent(stem, folder):
                    source.built.append(f"{where}: imports {stem}, which the submission does not hold (made at run "
                                        "time?)")
                elif (stem.startswith("_") or stem in others) and candidate not in seen and (
                        folder / candidate).is_file():
                    seen.add(candidate)
                    pending.append(candidate)
        if not pending:
            # Any private helper the submission holds may run without an import the ast can see (a string that a
            # library function evaluates, exec(open("_x.py").read()), a name the list of run-time uses misses):
            # every one is compared too, each once, whether or not something was flagged.
            pending += [path.name for path in sorted(folder.glob("_*.py")) if path.name not in seen
                        and path.name != "__init__.py"]
            seen.update(pending)
    source.text = "".join(parts)
    source.built = list(dict.fromkeys(source.built))
    return source


def runs_with(exercise: str) -> frozenset[str]:
    """The modules of other exercises that grading ``exercise`` runs when its module imports them.

    The exercises it depends on are served by the reference (fair grading): the others are the student's.
    """
    curriculum = load_curriculum()
    served = set(curriculum.dependencies(exercise)) | {exercise}
    return frozenset(Path(other.module_file).stem for other in curriculum.exercises if other.name not in served)


def kit_texts(module_file: str, imported: set[str], test_file: str = "") -> tuple[str, str]:
    """The kit's own code for a comparison: (what every student starts from, the reference).

    Parameters
    ----------
    module_file : str
        The exercise's module.
    imported : set of str
        The other modules the students' texts hold (``_tasks.py``, ``_mine.py``, ``tokenization.py``): the
        kit's own file of that name, where there is one, is boilerplate (the stub's) or reference too.
    test_file : str, optional
        The exercise's graded test file (relative to the kit), whose own implementations students can read:
        part of the reference.

    Returns
    -------
    tuple of str
        The stubs (``exercises/``) of ``module_file`` and of ``imported``; the reference's (``solutions/``)
        files of the same names, the kit's given implementations of them, then the test file.
    """
    stubs, solutions = ROOT / "exercises", reference_dir() or ROOT / "solutions"
    names = [module_file, *sorted(imported - {module_file, "__init__.py"})]

    def joined(folder: Path) -> str:
        return "\n\n".join(text for name in names if (text := read_source(folder / name)[0]))

    stub, reference = joined(stubs), joined(solutions)
    # The kit's given implementations are working code of the same exercises (a student's worker runs them under
    # fair grading, releases hand some out): a module copied from them is as close to the kit as the reference.
    given_code = given.folder()
    if given_code is not None:
        reference += "\n\n" + joined(given_code)
    if test_file:
        reference += "\n\n" + (read_source(ROOT / test_file)[0] or "")
    return stub, reference
