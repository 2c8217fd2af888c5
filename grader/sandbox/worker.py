"""The student's worker: runs a student's modules in a process of its own, as an unprivileged user.

Run by the worker process, in the sandbox (and nothing here runs in the grading process but the isolation tests).
This file is a script: it imports only the standard library, and, once the privileges are dropped, the
sandbox-side modules that lie beside it (``frames``, ``codec``, ``protocol``, ``calls``, ``kept``, ``by_code``, a copy
of ``tests/by_code.py``; ``forkserver`` for the fork server), never ``grader`` or ``tests``, because the sandbox holds
nothing else: a copy of the student's modules, the Python installation, this file and those modules (see
:func:`load_modules`). The grading process (``grader.sandbox.proxy``) starts it as::

    python -I -S -B worker.py --requests FD --replies FD --modules DIR --site DIR [--uid N --gid N]

or forks it from the fork server (``worker.py --serve``, :mod:`grader.sandbox.forkserver`), and talks to it over two
dedicated pipes, never over stdout/stderr (those are a capped capture of whatever the student prints). Messages are
frames (:mod:`grader.sandbox.frames`) of plain data (:mod:`grader.sandbox.codec`); the worker answers only the
requests that ``protocol.REQUESTS`` lists.
"""

from __future__ import annotations

import builtins
import os
import resource
import sys
import time
import types
from typing import Any

# The sandbox-side modules, imported by load_modules() after the privileges are dropped (frames imports numpy).
frames: Any = None
codec: Any = None
protocol: Any = None
calls: Any = None
by_code: Any = None
decoded: Any = None
stand_ins: Any = None
kept: Any = None
SANDBOX_PACKAGE = "_attention_kit_sandbox"  # their package when this file runs as a script (see load_modules)


def load_modules() -> Any:
    """Import ``frames``, ``codec``, ``protocol``, ``calls``, ``kept``, ``by_code``, ``decoded``, ``stand_ins``.

    Returns their package. Run as a script (in the sandbox), this file belongs to no package: a package of its
    own, ``_attention_kit_sandbox``, over its folder holds the copies the grading process placed there, loaded by
    the standard machinery (from the ``__pycache__`` the grading process compiled, where there is one:
    ``grader.sandbox.process.sandbox_files``). Imported as ``grader.sandbox.worker`` (the isolation tests), they
    are that package's own (``by_code`` and ``decoded``: ``tests``').
    """
    global frames, codec, protocol, calls, by_code, decoded, stand_ins, kept
    package = _package()
    if codec is None:
        import importlib

        importlib.import_module("numpy.random")  # (numpy's is lazy: each forked worker imported it again, 12 ms)
        frames = importlib.import_module(f"{package}.frames")
        codec = importlib.import_module(f"{package}.codec")
        protocol = importlib.import_module(f"{package}.protocol")
        calls = importlib.import_module(f"{package}.calls")
        stand_ins = importlib.import_module(f"{package}.stand_ins")
        kept = importlib.import_module(f"{package}.kept")
        by_code = importlib.import_module(f"{package}.by_code" if package == SANDBOX_PACKAGE else "tests.by_code")
        decoded = importlib.import_module(f"{package}.decoded" if package == SANDBOX_PACKAGE else "tests.decoded")
    return package


def _package() -> str:
    """The package of the sandbox-side modules (see :func:`load_modules`), made once when this file is a script."""
    package = __package__ or SANDBOX_PACKAGE
    if not __package__ and package not in sys.modules:
        namespace = types.ModuleType(package, "the worker's own modules, beside worker.py")
        namespace.__path__ = [os.path.dirname(os.path.abspath(__file__))]
        namespace.__package__ = package
        sys.modules[package] = namespace
    return package


def _shut_keyrings() -> str:
    """Refuse the kernel's key system calls to this worker, or empty its user's keyrings (``keyrings.shut``)."""
    import importlib

    return importlib.import_module(f"{_package()}.keyrings").shut()


_BUILTINS = dict(vars(builtins))
def restore_builtins() -> None:
    """Undo any change that student code made to the builtins module."""
    namespace = vars(builtins)
    if namespace != _BUILTINS:
        namespace.clear()
        namespace.update(_BUILTINS)


class Channel:
    """Blocking frame IO over the two protocol pipes (the worker's side)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = bytearray()

    def send(self, header: dict, arrays: list) -> None:
        """Write one frame (blocking)."""
        restore_builtins()
        self.send_frame(frames.pack(header, arrays))

    def send_frame(self, frame: bytes) -> None:
        """Write one frame packed before (blocking)."""
        data = memoryview(frame)
        while data:
            written = os.write(self.write_fd, data)
            data = data[written:]

    def receive(self) -> tuple[dict, list]:
        """Read one frame (blocking); EOFError when the grading process is gone."""
        while True:
            if self.buffer:
                parsed = frames.unpack(self.buffer)
                if parsed is not None:
                    message, size = parsed
                    del self.buffer[:size]
                    return message
                if len(self.buffer) >= frames.PREFIX.size:  # a valid prefix (unpack checked it), the frame incomplete
                    _, head_len, body_len = frames.PREFIX.unpack_from(self.buffer)
                    size = frames.PREFIX.size + head_len + body_len
                    if size - len(self.buffer) > frames.READ_BYTES:
                        return self._receive_large(size)
            chunk = os.read(self.read_fd, frames.READ_BYTES)
            if not chunk:
                raise EOFError("the grading process closed the channel")
            if not self.buffer:  # the usual case: one read holds the whole frame, parsed without buffering it
                parsed = frames.unpack(chunk)
                if parsed is not None:
                    message, size = parsed
                    self.buffer += memoryview(chunk)[size:]
                    return message
            self.buffer += chunk

    def _receive_large(self, size: int) -> tuple[dict, list]:
        """The rest of a large frame of ``size`` bytes, read straight into a buffer of its own (no copies)."""
        frame = bytearray(size)
        have = len(self.buffer)
        frame[:have] = self.buffer
        self.buffer = bytearray()
        with memoryview(frame) as view:
            while have < size:
                count = os.readv(self.read_fd, [view[have:]])
                if not count:
                    raise EOFError("the grading process closed the channel")
                have += count
        parsed = frames.unpack(frame, owned=True)
        if parsed is None or parsed[1] != size:  # cannot happen: the prefix gave the size
            raise ValueError("bad frame (the channel is corrupt)")
        return parsed[0]


class Worker:
    """Imports the student's modules lazily, one package per view, and runs calls."""

    def __init__(self, channel: Channel, modules: str) -> None:
        self.channel = channel
        self.modules = modules.rstrip("/") + "/"
        self.functions: dict[str, list[str]] = {}
        self.dependencies: dict[str, list[str]] = {}
        self.given: set[str] = set()  # the dependencies served by the kit's given code (grader.sandbox.given)
        # Their sources, as a view's first request brought them (grader.sandbox.given_views): never a file here.
        self.given_sources: dict[str, str] = {}
        self._loaded: dict[tuple[str, str], tuple[str, str, types.ModuleType]] = {}  # see load()
        # The student's API functions the current call reached ((caller, callee) names: ``calls.Reach``).
        self.reach = calls.Reach(self.modules, protocol.MAX_REACHED, by_code, decoded)
        by_code.carry_threads()  # before any student code: the threads it starts are within a watched call's reach
        # The sealed answers of each view it was given (grader.sandbox.sealed): view -> (index -> (offset, size,
        # CPU seconds) in their bytes, those bytes); the view of the call running now, and the reference's CPU
        # seconds of the answers it opened.
        self.sealed: dict[str, tuple[dict[bytes, tuple[int, int, float]], Any]] = {}
        self.view, self.opened_cpu = "", 0.0
        # The questions a call asks the grading process, one at a time (threads of the student's take turns).
        self.questions = stand_ins.Asking(channel, codec)
        self.asking = self.questions.lock
        # The kit's own check (the grading side says so per call, ``protocol``): the folder is the reference, so
        # its callbacks are answered here, by the same modules, and sent back sealed, with no round trip.
        self.answer_here, self.answered = False, []
        self.sent = kept.Sent()  # the arrays its results gave (``kept``): one object crosses as one, call after call

    # -- packages

    def package(self, view: str) -> str:
        """Create (once) the package for ``view``: an exercise name (fair) or "all"."""
        name = f"_student_{view}"
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [self.modules.rstrip("/")]
            package.__package__ = name
            sys.modules[name] = package
            # Fair grading: the exercises this one depends on are the kit's given implementations (``given/``
            # beside this file: kit code written apart from the reference, shipped to students anyway), run here and
            # so charged to the student as their own code is; an exercise with none is served by the reference, in a
            # worker of its own. Both in the order of the manifest, so that each module's own dependencies are
            # registered before it runs.
            given = types.ModuleType(f"_given_{view}", "the given implementations of this view's dependencies")
            given.__path__ = []  # a given module imports its siblings only: never a file of the student's folder
            given.__package__ = given.__name__
            sys.modules[given.__name__] = given
            for dependency in self.dependencies.get(view, []):
                module = (self.given_module(given.__name__, dependency) if dependency in self.given else None) \
                    or self.forwarding_module(name, dependency)
                sys.modules[f"{given.__name__}.{dependency}"] = sys.modules[f"{name}.{dependency}"] = module
        return name

    def given_module(self, package: str, exercise: str) -> types.ModuleType | None:
        """The given implementation of ``exercise`` as a module of ``package``, or None where the kit has none.

        It offers every function the reference's module offers: its exercise's own (a function it lacks is served
        by the reference) and those of the exercises it builds on, as the reference's module imports them.
        """
        source = self.given_sources.get(exercise)
        if not isinstance(source, str):
            return None
        code = compile(source, f"given/{exercise}.py", "exec", dont_inherit=True)
        module = types.ModuleType(f"{package}.{exercise}")
        module.__package__ = package
        module.__file__ = code.co_filename
        sys.modules[module.__name__] = module
        exec(code, module.__dict__)  # noqa: S102 - the kit's own code, sent by the grading process
        for function in self.functions.get(exercise, []):
            if not callable(getattr(module, function, None)):
                setattr(module, function, self.forwarder(exercise, function))
        for owner in self.dependencies.get(exercise, []):
            for function in self.functions.get(owner, []):
                if not hasattr(module, function):
                    setattr(module, function, getattr(sys.modules[f"{package}.{owner}"], function))
        return module

    def forwarding_module(self, package: str, exercise: str) -> types.ModuleType:
        """A module standing in for ``exercise``: each function asks the grading process for the reference's answer."""
        module = types.ModuleType(f"{package}.{exercise}", f"{exercise}.py, served by the reference implementation")
        module.__package__ = package
        # The reference module also exposes the names it imports from its own dependencies.
        for owner in [exercise, *self.dependencies.get(exercise, [])]:
            for function in self.functions.get(owner, []):
                if not hasattr(module, function):
                    setattr(module, function, self.forwarder(owner, function))
        return module

    def forwarder(self, exercise: str, function: str) -> Any:
        """A function that sends its call to the grading process and returns the reference's answer.

        Where the question is one whose sealed answer this worker holds, the answer is opened here instead.
        """
        channel = self.channel

        def forward(*args: Any, **kwargs: Any) -> Any:
            arrays: list = []
            try:
                payload = codec.encode([list(args), kwargs], arrays)
            except codec.Unsendable:  # (a function among them): the reference cannot be asked, the student's own is
                if not os.path.isfile(f"{self.modules}{exercise}.py"):  # run, as in their own pytest
                    raise
                return getattr(self.load(exercise, exercise), function)(*args, **kwargs)
            message = {"op": "callback", "exercise": exercise, "function": function, "payload": payload}
            with self.asking:  # a question and its reply (threads asking at once crossed their replies)
                table = self.sealed.get(self.view)
                opened = self.answer(message, arrays) if self.answer_here else None
                if opened is None and table is not None:
                    opened, frame = self.open_sealed(table, message, arrays)
                    if opened is None:
                        channel.send_frame(frame)
                elif opened is None:
                    channel.send(message, arrays)
                header, reply_arrays = opened or channel.receive()
            if header.get("status") != "ok":
                raise codec.rebuild_exception(header.get("error", {}))
            return codec.receive_result(header["payload"], reply_arrays, args, kwargs)

        forward.__name__ = forward.__qualname__ = function
        return forward

    def answer(self, message: dict, arrays: list) -> tuple[dict, list] | None:
        """A callback answered here (the kit's check) as the reference's worker would, kept sealed; None: ask.

        None where this folder lacks a module it needs (a selection's check holds the selected exercises' only).
        """
        exercise = message["exercise"]
        if not all(os.path.isfile(f"{self.modules}{m}.py") for m in [exercise, *self.dependencies.get(exercise, [])]):
            return None
        index, key = frames.question_keys(message, arrays)
        arrays = frames.unpack(frames.pack(message, arrays))[0][1]  # received as the reference's worker gets them
        args, kwargs = codec.decode(message["payload"], arrays, functions=self.questions.grading_function)
        clock = time.process_time()
        try:  # the reference's own module, whole (``VIEW_ALL``: its own dependencies, no callback)
            result = getattr(self.load(protocol.VIEW_ALL, exercise), message["function"])(*args, **kwargs)
            answer_arrays: list = []
            payload = codec.result_payload(result, [list(args), kwargs], message["payload"], arrays, answer_arrays)
            answer = frames.pack({"status": "ok", "payload": payload}, answer_arrays)
        except ImportError:  # a module this folder lacks after all (imported on the way): the grading process's
            return None
        except BaseException as error:  # noqa: BLE001 - the reference's error, as type and message only
            info = codec.exception_info(error)
            info["traceback"] = []
            answer = frames.pack({"status": "error", "error": info}, [])
            if protocol.of_the_moment(error):  # this worker's memory or stack, not the reference's answer: not kept
                return frames.unpack(answer)[0]
        self.answered.append((index, frames.seal(key, answer), time.process_time() - clock))
        return frames.unpack(answer)[0]  # fresh arrays, as a round trip gives them

    def send_reply(self, reply: dict, arrays: list) -> None:
        """Send a call's reply, after the callbacks it answered here (``answered_here``: at most 32 MiB a call)."""
        answered, self.answered = self.answered, []
        if answered and sum(len(blob) for _, blob, _ in answered) <= 32 << 20:
            import numpy as np

            entries = [[index.hex(), len(blob), cpu] for index, blob, cpu in answered]
            body = np.frombuffer(b"".join(blob for _, blob, _ in answered), np.uint8)
            self.channel.send({"op": "answered_here", "entries": entries}, [body])
        restore_builtins()  # (as channel.send does) then packed, kept.Sent.pack digesting what the student holds
        self.channel.send_frame(self.sent.pack(reply, arrays) if protocol.KEPT in reply else frames.pack(reply, arrays))

    def open_sealed(self, table: tuple[dict[bytes, tuple[int, int, float]], Any], message: dict,
                    arrays: list) -> tuple[tuple[dict, list] | None, bytes]:
        """The answer to a callback from a view's sealed answers (None: not among them, so ask), and its frame."""
        restore_builtins()
        index, key = frames.question_keys(message, arrays)  # the digests of the frame, never packed if found
        entries, sealed_body = table
        found = entries.get(index)
        if found is None:
            return None, frames.pack(message, arrays)
        offset, size, cpu = found
        try:
            with memoryview(sealed_body) as body:
                parsed = frames.unpack(frames.seal(key, body[offset : offset + size]), owned=True)
        except ValueError:  # not an answer (the worker's own copy was written over): asked instead
            parsed = None
        if parsed is None:
            return None, frames.pack(message, arrays)
        self.opened_cpu += cpu
        return parsed[0], b""

    def stand_in_steps(self, module: types.ModuleType, steps: Any) -> list[tuple]:
        """For a watched call (``steps``: {API function: index}), have the grading process see those functions' calls.

        ``stand_ins.swap`` puts :meth:`stand_in` in their place for the call (``grader.sandbox.watched`` says why);
        never the worker's end: anything that goes wrong is put back, and nothing is then recorded.
        """
        return stand_ins.swap(module, steps, self.modules, self.questions.stand_in)

    def load(self, view: str, module: str) -> types.ModuleType:
        """Import the student's ``module`` in the package of ``view``.

        A module imported before is returned as long as it (and its package) are still the ones in
        ``sys.modules``, as ``importlib.import_module`` would return it, without its machinery on every call.
        """
        known = self._loaded.get((view, module))
        if known is not None and known[0] in sys.modules and sys.modules.get(known[1]) is known[2]:
            return known[2]
        import importlib

        package = self.package(view)
        loaded = importlib.import_module(f"{package}.{module}")
        self._loaded[(view, module)] = (package, f"{package}.{module}", loaded)
        return loaded

    def describe_import_error(self, module: str, error: BaseException) -> str:
        """Say in one line why ``module`` could not be imported (``codec.import_error_text``)."""
        return codec.import_error_text(module, error, self.modules)

    def exercises_of(self, view: str) -> Any:
        """The exercises whose modules are the student's in ``view``: its own under fair grading, else every one."""
        return self.functions if view == protocol.VIEW_ALL else (view,)

    def call_notes(self) -> dict:
        """What a call's reply says of it besides its result: what it reached, the sealed answers' CPU seconds."""
        notes: dict = {protocol.REACHED: self.reach.pairs()}
        if self.reach.untraced:
            notes[protocol.UNTRACED] = True
        if self.reach.counted or self.reach.watching:  # (a watched call says so, even when it saw nothing)
            notes[protocol.COUNTED] = self.reach.counts()
        if self.opened_cpu:
            notes[protocol.ANSWERED] = self.opened_cpu
        return notes

    # -- requests

    def handle(self, header: dict, arrays: list) -> None:
        """Answer one request of the grading process."""
        try:
            self.dispatch(header, arrays)
        finally:
            # Student code may have replaced builtins (len, isinstance, ...); the worker's own code needs the real
            # ones. A patch made at import or in one call therefore does not last into the next call.
            restore_builtins()

    def dispatch(self, header: dict, arrays: list) -> None:
        """Route one request by its ``op``: only the requests that ``protocol.REQUESTS`` lists."""
        try:
            op = protocol.check(header, protocol.REQUESTS)
        except ValueError as error:
            self.channel.send({"status": "error", "error": {"type": "ValueError", "message": str(error)}}, [])
            return
        if op == "init":
            self.functions = header["functions"]
            self.dependencies = header["dependencies"]
            self.given = set(header["given"])
            self.reach.home = {function: exercise for exercise, functions in self.functions.items()
                          for function in functions}
            self.channel.send({"status": "ok", "pid": os.getpid(), "uid": os.getuid()}, [])
        elif op == "import":
            self.given_sources.update(header.get("given") or {})
            self.handle_import(header)
        elif op == "call":
            self.given_sources.update(header.get("given") or {})
            self.handle_call(header, arrays)
        elif op == "answers":  # no reply: the call it comes before follows
            entries, offset = {}, 0
            for index, size, cpu in header["entries"]:
                entries[bytes.fromhex(index)], offset = (offset, size, cpu), offset + size
            body = arrays[0] if arrays else b""  # this frame's own buffer (frames.unpack, owned): kept, not copied
            if len(body) == offset:  # (anything else is not these answers: their questions are asked)
                self.sealed[header["view"]] = (entries, body)
                soft, hard = resource.getrlimit(resource.RLIMIT_AS)  # the kit's bytes: as much more address space
                if soft != resource.RLIM_INFINITY:  # (within the hard limit's room, forkserver.apply_limits)
                    resource.setrlimit(resource.RLIMIT_AS, (min(hard, soft + len(body)), hard))
        elif op == "forget_answers":  # no reply either
            for view in header["views"]:
                self.sealed.pop(view, None)
        elif op == "preload":
            self.preload(header["modules"])
        elif op == "signature":
            self.handle_signature(header)

    def preload(self, names: list) -> None:
        """Import the installed modules ``names`` (``preload``): never one of the student's folder; failures pass."""
        import importlib.util

        for name in names[:64]:
            try:
                spec = importlib.util.find_spec(name) if type(name) is str else None
                if spec is not None and not str(spec.origin or "").startswith(self.modules):
                    importlib.import_module(name)
            except BaseException:  # noqa: BLE001, S112 - a library that does not import: the call says so itself
                continue
        self.channel.send({"status": "ok"}, [])

    def handle_import(self, header: dict) -> None:
        """Import a module and report its public callables, or why it failed."""
        module = header["module"]
        try:
            loaded = self.load(header["view"], module)
        except BaseException as error:  # noqa: BLE001 - SystemExit at import is the student's, report it
            self.channel.send({"status": "import_error", "message": self.describe_import_error(module, error)}, [])
            return
        names = [name for name in dir(loaded) if not name.startswith("_") and callable(getattr(loaded, name, None))]
        self.channel.send({"status": "ok", "callables": names}, [])

    def handle_signature(self, header: dict) -> None:
        """Describe a student function's parameters as plain data (``codec.described_signature``), or None."""
        try:
            parameters = codec.described_signature(getattr(self.load(header["view"], header["module"]),
                                                           header["function"]))
        except BaseException:  # noqa: BLE001 - no signature to describe: none is sent, and no claim is made
            parameters = None
        self.channel.send({"status": "ok", "parameters": parameters}, [])

    def handle_call(self, header: dict, arrays: list) -> None:
        """Run one student function; reply with its result and arguments, or its exception as text."""
        module, function = header["module"], header["function"]
        self.questions.calls += 1
        self.sent.take(header.get("tokens"), arrays)  # the arrays it gave that the test passes back: its own again
        try:
            loaded = self.load(header["view"], module)
            self.reach.instrument(f"_student_{header['view']}", self.exercises_of(header["view"]))
            target = getattr(loaded, function)
        except BaseException as error:  # noqa: BLE001
            self.channel.send({"status": "import_error", "message": self.describe_import_error(module, error)}, [])
            return
        self.reach.start()
        self.view, self.opened_cpu = header["view"], 0.0
        self.answer_here, self.answered = header.get("answer_here") is True, []
        _one_thread()
        self.questions.open = self.questions.calls
        swapped = self.stand_in_steps(loaded, header.get("steps"))
        try:  # arguments that cannot be rebuilt (a callback's: the student's data) are the call's ValueError
            args, kwargs = codec.decode(header["payload"], arrays, functions=self.questions.grading_function)
            every_call = self.reach.every_call(header.get("every_call") is True, f"_student_{self.view}",
                                               self.exercises_of(self.view), function, header.get("made_of") or "",
                                               (args, kwargs))
            with codec.RecordedWarnings() as caught, every_call:
                result = target(*args, **kwargs)
        except SystemExit as error:
            info = {"type": "SystemExit", "builtins": [], "traceback": [],
                    "message": f"your code called sys.exit({error.code!r}) while running {function}()"}
            self.send_reply({"status": "error", "error": info, **self.call_notes()}, [])
            return
        except BaseException as error:  # noqa: BLE001 - every student failure goes back as text
            self.send_reply({"status": "error", "error": codec.exception_info(error, keep=self.modules),
                             **self.call_notes()}, [])
            return
        finally:
            self.questions.close()  # a thread's question under way ends first; none starts after
            stand_ins.restore(swapped)
        reply_arrays: list = []
        try:
            payload = codec.result_payload(result, [list(args), kwargs], header["payload"], arrays, reply_arrays)
        except Exception as error:  # noqa: BLE001 - e.g. a result that is not plain data
            info = {"type": "TypeError", "builtins": ["TypeError"], "traceback": [],
                    "message": f"{function}() returned a value the grader cannot receive: {error}"}
            self.send_reply({"status": "error", "error": info, **self.call_notes()}, [])
            return
        reply = {"status": "ok", "payload": payload, "warnings": codec.warning_list(caught), **self.call_notes()}
        if (made_of := self.reach.made_of(result)) is not None:
            reply[protocol.MADE_OF] = made_of
        if header.get("kept") is True:  # the grading side's own call (``kept``), never a callback's answer
            reply[protocol.KEPT] = self.sent.note(reply_arrays, len(reply_arrays), arrays)
        del result, args, kwargs, every_call  # what the student's code keeps is then all that holds a result
        self.send_reply(reply, reply_arrays)

def _one_thread() -> None:
    """Torch, if the student's code imported it, computes on one thread, as BLAS and OpenMP do here.

    The environment's ``OMP_NUM_THREADS=1`` (``limits.worker_environment``) sets torch's pool at its import, but a
    student's module may set more, and torch keeps an inter-op pool the size of the machine; the per-call budget
    counts every thread's CPU time, spinning ones' too (issue 34: 40.8 s on two threads, 1.8 s on one).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.get_num_threads() != 1:
            torch.set_num_threads(1)
        if torch.get_num_interop_threads() != 1:
            torch.set_num_interop_threads(1)  # only possible before torch's first parallel work
    except Exception:  # noqa: BLE001, S110 - a torch without these, or past its first parallel work: as it is
        pass


def _drop_privileges(uid: int, gid: int) -> None:
    if os.getuid() == 0 and uid != 0:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if os.getuid() != uid:
            raise SystemExit("could not drop privileges")


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def forked_worker(requests: int, replies: int, modules: str, uid: int, gid: int) -> int:
    """The rest of a worker that the fork server forked (its limits set, the server's files closed): run it.

    It drops to ``uid`` before it touches anything of the submission, then runs exactly what a worker
    started on its own runs (:func:`run_worker`).
    """
    _drop_privileges(uid, gid)
    _shut_keyrings()
    # The command line a worker started on its own would have (student code may read it).
    sys.argv = [sys.argv[0], "--requests", str(requests), "--replies", str(replies), "--modules", modules,
                "--uid", str(uid), "--gid", str(gid)]
    return run_worker(requests, replies, modules)


def _no_new_privileges() -> None:
    """No program this process or its children run gains privileges (``PR_SET_NO_NEW_PRIVS``; bubblewrap sets it).

    Else a setuid program an earlier worker's user made lets a later worker become that user, out of reach of the
    kill of its own, and once ids come round another worker's (so a hostile round read the reference's modules).
    """
    if sys.platform.startswith("linux") and __import__("ctypes").CDLL(None).prctl(38, 1, 0, 0, 0) != 0:
        raise SystemExit("could not set no_new_privs")


def run_worker(read_fd: int, write_fd: int, modules: str) -> int:
    """Serve the grading process's requests over the two pipes until it closes them (numpy is imported)."""
    _no_new_privileges()  # before any student code
    os.chdir(modules)
    for fd in (read_fd, write_fd):
        os.set_inheritable(fd, False)  # programs that student code executes do not get the channel
    # A process that student code forks must never speak on the channel: close it there at once.
    os.register_at_fork(after_in_child=lambda: [_close_quietly(fd) for fd in (read_fd, write_fd)])
    channel = Channel(read_fd, write_fd)
    worker = Worker(channel, os.path.realpath(modules))
    while True:
        try:
            header, arrays = channel.receive()
        except EOFError:
            return 0
        worker.handle(header, arrays)


def main(argv: list[str]) -> int:
    """Entry point of the worker process (or, with ``--serve``, of the fork server)."""
    options = dict(zip(argv[0::2], argv[1::2], strict=False))
    if options.get("--site"):
        sys.path.append(options["--site"])
    if "--serve" in options:
        import importlib

        forkserver = importlib.import_module(f"{load_modules()}.forkserver")
        return forkserver.serve(int(options["--serve"]), options["--students"], forked_worker)
    read_fd, write_fd = int(options["--requests"]), int(options["--replies"])
    if "--uid" in options:
        _drop_privileges(int(options["--uid"]), int(options.get("--gid", options["--uid"])))
        _shut_keyrings()
    os.chdir(options["--modules"])
    load_modules()  # numpy and the protocol, before any student code runs
    return run_worker(read_fd, write_fd, options["--modules"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
elif __package__:  # grader.sandbox.worker, imported in the grading process (its tests)
    load_modules()
