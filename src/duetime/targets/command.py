"""Command targets: a job names a command from the worker's allow-list; the worker runs it.

A job's target ``{"type": "command", "name": "backup"}`` runs under the task name
``duetime.command:backup`` (:func:`command_task`). Only workers whose configuration lists
``backup`` serve that task: they publish it with their task names when they start, so
registration refuses a command no worker serves (unless ``allow_unregistered``), and only those
workers claim its runs. The command's text never comes from a request: the configuration
(``DUETIME_COMMANDS``: a JSON object, or the path of a file holding one) says what runs::

    {"backup": {"argv": ["pg_dump", "--table", "{payload.table}", "{run.id}"],
                "cwd": "/srv", "env": {"PGHOST": "db"}, "timeout": 600,
                "retryable_exit_codes": [75], "kill_grace": 5}}

Each argv element is one argument of the process: ``{payload.a.b}`` and ``{run.id}`` /
``{run.attempt}`` / ``{run.scheduled_for}`` / ``{run.token}`` are replaced inside the element
and never split it (no shell ever runs: spaces, quotes, ``;`` or ``$()`` in a payload arrive
as literal text). ``{{`` and ``}}`` are literal braces. The process inherits the worker's
environment but its ``DUETIME_*`` variables (the database URL, secrets), plus the command's
``env`` and the run's ``DUETIME_RUN_ID`` / ``_ATTEMPT`` / ``_FENCING_TOKEN`` /
``_SCHEDULED_FOR``. A string value is used as is, any other
JSON value as its JSON text; a missing field or a value holding NUL fails the run at once.

Outcomes: exit 0 is success, and the run keeps ``{"exit_code", "stdout", "stderr"}`` (the
streams' last :data:`TAIL_BYTES` bytes) as its result; another exit status fails the attempt —
retryable if ``retryable_exit_codes`` lists it (every non-zero status when the field is
absent), else permanent — with the tails appended to the attempt's traceback (as notes, so the
error message stays one line). Past the command's ``timeout``, and when the attempt is
cancelled (an operator, the job's timeout, a lost lease, shutdown), the command's whole process
group gets SIGTERM, then SIGKILL after ``kill_grace`` seconds: the command runs in a session of
its own (``start_new_session``), so grandchildren go too. Processes of the group still alive
when the command exits are ended the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duetime import _json
from duetime._aio import uncancellable
from duetime.errors import Permanent, ValidationError
from duetime.targets.context import RunContext

COMMAND_TASK_PREFIX = "duetime.command:"
"""Command targets run under ``duetime.command:<name>``: the task a serving worker publishes."""
TAIL_BYTES = 4096
"""How much of the end of stdout and of stderr a run keeps."""
DEFAULT_TIMEOUT = 3600.0
DEFAULT_KILL_GRACE = 5.0
KILL_WAIT = 5.0
"""Seconds to wait for a SIGKILLed process group to disappear."""
MAX_ARGS = 256
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_RUN_FIELDS = ("id", "attempt", "scheduled_for", "token", "job_name", "tenant")
_KEYS = frozenset({"argv", "cwd", "env", "timeout", "retryable_exit_codes", "kill_grace"})


def command_task(name: str) -> str:
    """The task name a command target runs under (and its serving workers publish)."""
    return f"{COMMAND_TASK_PREFIX}{name}"


# --- configuration ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """One allow-listed command, validated."""

    name: str
    argv: tuple[str, ...]
    cwd: str | None = None
    env: Mapping[str, str] | None = None
    """Added to the worker's environment (a value of None removes that variable)."""
    timeout: float = DEFAULT_TIMEOUT
    retryable_exit_codes: frozenset[int] | None = None
    """Exit statuses retried; None: every non-zero status."""
    kill_grace: float = DEFAULT_KILL_GRACE

    @property
    def task(self) -> str:
        return command_task(self.name)


def load_commands(text: str | None) -> dict[str, Command]:
    """The allow-list from ``DUETIME_COMMANDS``: JSON text (starting with ``{``) or the path of
    a JSON file. Empty: no commands. Raises ValidationError naming the bad field."""
    if text is None or not text.strip():
        return {}
    source = text.strip()
    if not source.startswith("{"):
        try:
            source = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValidationError("commands", f"cannot read {text!r}: {exc.strerror}") from None
    try:
        raw = json.loads(source)
    except ValueError as exc:
        raise ValidationError("commands", f"is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValidationError("commands", "must be a JSON object of command names to commands")
    return {name: _command(name, spec) for name, spec in raw.items()}


def _command(name: object, spec: object) -> Command:
    where = f"commands.{name}"
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValidationError(
            where, "a command name is 1-100 letters, digits, '_', '.' or '-' (a letter first)"
        )
    if not isinstance(spec, dict):
        raise ValidationError(where, 'must be an object such as {"argv": ["prog", "arg"]}')
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise ValidationError(f"{where}.{unknown[0]}", f"unknown field (known: {sorted(_KEYS)})")
    argv = spec.get("argv")
    if (
        not isinstance(argv, list)
        or not argv
        or len(argv) > MAX_ARGS
        or not all(isinstance(a, str) and "\0" not in a for a in argv)
    ):
        raise ValidationError(
            f"{where}.argv", f"must be a list of 1-{MAX_ARGS} strings (the program first)"
        )
    for arg in argv:
        _check_template(f"{where}.argv", arg)
    if "{" in argv[0] or "}" in argv[0]:
        raise ValidationError(f"{where}.argv", "the program (argv[0]) cannot be a placeholder")
    cwd = spec.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise ValidationError(f"{where}.cwd", "must be a directory path")
    env = spec.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and k and "=" not in k for k in env)
        or not all(v is None or isinstance(v, str) for v in env.values())
    ):
        raise ValidationError(f"{where}.env", "must map variable names to strings (or null)")
    codes = spec.get("retryable_exit_codes")
    if codes is not None and (
        not isinstance(codes, list)
        or not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 255 for c in codes)
    ):
        raise ValidationError(f"{where}.retryable_exit_codes", "must be a list of 1-255")
    return Command(
        name=name,
        argv=tuple(argv),
        cwd=cwd,
        env=env,
        timeout=_seconds(f"{where}.timeout", spec.get("timeout", DEFAULT_TIMEOUT)),
        retryable_exit_codes=None if codes is None else frozenset(codes),
        kill_grace=_seconds(f"{where}.kill_grace", spec.get("kill_grace", DEFAULT_KILL_GRACE)),
    )


def _seconds(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
        raise ValidationError(where, "must be seconds above 0 and at most 86400")
    return float(value)


def _check_template(where: str, arg: str) -> None:
    for match in _PLACEHOLDER.finditer(arg):
        inner = match.group(1)
        if inner is None:
            continue
        head, _, rest = inner.partition(".")
        if head == "payload":
            if rest and all(_FIELD.fullmatch(p) for p in rest.split(".")):
                continue
        elif head == "run" and rest in _RUN_FIELDS:
            continue
        raise ValidationError(
            where,
            f"{{{inner}}} in {arg!r} is not a placeholder: use {{payload.<field>[.<field>…]}} "
            f"or {{run.<{'|'.join(_RUN_FIELDS)}>}} (and {{{{ }}}} for literal braces)",
        )
    if _PLACEHOLDER.sub("", arg).count("{") or _PLACEHOLDER.sub("", arg).count("}"):
        raise ValidationError(where, f"{arg!r} has an unpaired brace (write {{{{ or }}}})")


def check_commands(commands: Mapping[str, Command]) -> list[tuple[str, bool, str]]:
    """For ``duetime doctor``: per command, (name, runnable here, what was found): its
    program is found (a path, or a name on ``PATH``) and executable, its ``cwd`` exists."""
    found: list[tuple[str, bool, str]] = []
    for command in commands.values():
        program = command.argv[0]
        path = program if os.sep in program else shutil.which(program)
        if path is None or not os.access(path, os.X_OK) or not os.path.isfile(path):
            found.append((command.name, False, f"{program!r} is not an executable file here"))
        elif command.cwd is not None and not os.path.isdir(command.cwd):
            found.append((command.name, False, f"its cwd {command.cwd!r} is not a directory"))
        else:
            found.append((command.name, True, f"runs {path}"))
    return found


# --- validation at registration ---------------------------------------------------------------


def validate_command_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """A command target, checked: ``{"type": "command", "name": NAME}`` and nothing else (the
    command's text is the worker's configuration, never the request's)."""
    unknown = sorted(str(k) for k in target if k not in ("type", "name"))
    if unknown:
        raise ValidationError(
            f"target.{unknown[0]}",
            "unknown field: a command target only names a command of the workers' allow-list "
            "(DUETIME_COMMANDS)",
        )
    name = target.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValidationError(
            "target.name", "must name a command of the workers' allow-list (DUETIME_COMMANDS)"
        )
    return {"type": "command", "name": name}


# --- argv -------------------------------------------------------------------------------------


class CommandRejected(Permanent):
    """The run cannot run its command (unknown here, a placeholder the payload cannot fill)
    or the command exited with a status not listed as retryable."""

    exit_code: int | None = None


class CommandFailed(Exception):
    """The command exited with a retryable status or was killed by a signal (retried)."""

    exit_code: int | None = None


class CommandTimeout(TimeoutError):
    """The command ran past its timeout; its process group was ended (retried)."""


def render_argv(command: Command, ctx: RunContext) -> list[str]:
    """The process's arguments: each template element filled in, one argument each."""
    return [_render(arg, ctx) for arg in command.argv]


def _render(arg: str, ctx: RunContext) -> str:
    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        head, _, rest = match.group(1).partition(".")
        value = _payload_field(ctx.payload, rest) if head == "payload" else _run_field(ctx, rest)
        text = value if isinstance(value, str) else _json.dumps(value)
        if "\0" in text:
            raise CommandRejected(f"{{{match.group(1)}}} holds a NUL character")
        return text

    return _PLACEHOLDER.sub(fill, arg)


def _payload_field(payload: Any, path: str) -> Any:
    value = payload
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise CommandRejected(f"the payload has no field {path!r} ({{payload.{path}}})")
        value = value[part]
    return value


def _run_field(ctx: RunContext, name: str) -> Any:
    if name == "id":
        return str(ctx.run_id)
    if name == "scheduled_for":
        return ctx.scheduled_for.isoformat()
    return getattr(ctx, name)


# --- execution --------------------------------------------------------------------------------


class _Tail:
    """The last ``limit`` bytes of a stream."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            self.total += len(chunk)
            self.data += chunk
            if len(self.data) > self.limit:
                del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        cut = self.total - len(self.data)
        return f"[… {cut} earlier bytes cut …]\n{text}" if cut else text


class CommandExecutor:
    """Runs command targets from the allow-list ``commands``; one per worker."""

    def __init__(self, commands: Mapping[str, Command]) -> None:
        self.commands = dict(commands)

    def task_names(self) -> list[str]:
        """The tasks this worker serves for its commands (published when it registers)."""
        return [c.task for c in self.commands.values()]

    async def execute(self, ctx: RunContext, target: Mapping[str, Any]) -> dict[str, Any]:
        """Run the command once; returns ``{"exit_code": 0, "stdout", "stderr"}`` (tails).
        Raises CommandRejected (permanent), CommandFailed or CommandTimeout (retryable); a
        cancel ends the process group, then propagates."""
        name = str(target.get("name"))
        command = self.commands.get(name)
        if command is None:
            raise CommandRejected(f"command {name!r} is not in this worker's allow-list")
        argv = render_argv(command, ctx)
        # the worker's own settings and secrets (DUETIME_DATABASE_URL, DUETIME_SECRET_*) stay
        # with the worker: a command gets what its configuration gives it
        env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
        for key, value in (command.env or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        env.update(
            DUETIME_RUN_ID=str(ctx.run_id),
            DUETIME_ATTEMPT=str(ctx.attempt),
            DUETIME_FENCING_TOKEN=str(ctx.token),
            DUETIME_SCHEDULED_FOR=ctx.scheduled_for.isoformat(),
        )
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=command.cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group: ended as a whole
            )
        except OSError as exc:
            raise CommandRejected(f"command {name!r} could not start: {exc}") from None
        out, err = _Tail(), _Tail()
        readers = asyncio.gather(out.drain(process.stdout), err.drain(process.stderr))
        try:
            code, failure = await self._wait(command, process)
            # members of its group left behind would hold the pipes open: ended too
            await end_group(process.pid, command.kill_grace)
            await readers
        except BaseException:  # cancelled: the attempt ends, and the command with it
            await uncancellable(end_group(process.pid, command.kill_grace))
            readers.cancel()
            readers.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved
            raise
        if failure is None:
            return {"exit_code": code, "stdout": out.text(), "stderr": err.text()}
        failure.add_note(f"--- stdout (last {TAIL_BYTES} bytes) ---\n{out.text()}")
        failure.add_note(f"--- stderr (last {TAIL_BYTES} bytes) ---\n{err.text()}")
        raise failure

    @staticmethod
    async def _wait(
        command: Command, process: asyncio.subprocess.Process
    ) -> tuple[int | None, Exception | None]:
        """The exit status and the failure it is (None: success); past the timeout the group
        is ended and the failure is a CommandTimeout."""
        try:
            status = await asyncio.wait_for(process.wait(), command.timeout)
        except TimeoutError:
            await end_group(process.pid, command.kill_grace)
            await process.wait()
            return None, CommandTimeout(
                f"command {command.name!r} timed out after {command.timeout:g}s; "
                "its process group was ended"
            )
        return status, None if status == 0 else _exit_failure(command, status)


def _exit_failure(command: Command, code: int) -> Exception:
    if code < 0:
        error: CommandFailed | CommandRejected = CommandFailed(
            f"command {command.name!r} was killed by signal {-code}"
        )
    elif command.retryable_exit_codes is None or code in command.retryable_exit_codes:
        error = CommandFailed(f"command {command.name!r} exited with status {code}")
    else:
        error = CommandRejected(
            f"command {command.name!r} exited with status {code} (not retryable)"
        )
    error.exit_code = code
    return error


async def end_group(pgid: int, grace: float) -> None:
    """SIGTERM the process group ``pgid``, then SIGKILL it if any member is left after
    ``grace`` seconds; returns once the group is gone (or :data:`KILL_WAIT` seconds after the
    SIGKILL, if members linger as zombies no one reaps). At once when it is already gone."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    if await _gone(pgid, grace):
        return
    _signal_group(pgid, signal.SIGKILL)
    await _gone(pgid, KILL_WAIT)


async def _gone(pgid: int, within: float) -> bool:
    """Wait up to ``within`` seconds for the group to be empty; whether it is."""
    deadline = time.monotonic() + within
    while _signal_group(pgid, 0):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process is left in it."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # only zombies left (macOS answers EPERM for them)
        return False
    return True


__all__ = [
    "COMMAND_TASK_PREFIX",
    "Command",
    "CommandExecutor",
    "CommandFailed",
    "CommandRejected",
    "CommandTimeout",
    "check_commands",
    "command_task",
    "end_group",
    "load_commands",
    "render_argv",
    "validate_command_target",
]
