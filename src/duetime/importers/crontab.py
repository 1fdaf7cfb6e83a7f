"""A crontab (a user's, or ``/etc/crontab`` with its user column) → command-target jobs and
the allow-list entries (``DUETIME_COMMANDS``) the workers need to run them.

Pure translation: :func:`convert` reads the text and returns job specs (``app.schedule``
fields), the commands to allow-list, notes on what did not carry over and the lines it
refuses, each with its number and why. Nothing is ever taken from a request: the commands
come from the crontab the operator gives, and the workers only run what the allow-list they
are deployed with says.

What a line becomes:

* ``#`` comments and blank lines: nothing.
* ``NAME=value`` (spaces around ``=`` allowed, the value optionally quoted): an environment
  variable of the commands on the lines after it, as cron does — except ``CRON_TZ`` (the zone
  of the schedules after it), ``MAILTO``/``MAILFROM`` (not carried over: duetime mails no
  output; a failed run raises an alert instead) and ``SHELL`` (the shell of ``--allow-shell``
  lines; cron's is ``/bin/sh``). ``HOME`` also becomes the command's working directory (cron
  starts commands there). ``TZ`` is only passed on: cron schedules in its own zone.
* Five time fields (or ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``, ``@daily``,
  ``@midnight``, ``@hourly``), then the user for a system crontab, then the command: a job
  with that cron expression in the line's zone and the target ``{"type": "command", "name":
  <job name>}``. ``@reboot`` is refused: duetime has no "at start" event.
* A command is split into argv with :mod:`shlex` when it needs no shell. One that does — a
  pipe, a redirection, ``;``, ``&&``, a ``$VAR`` or ``$(…)``/backtick substitution, a glob, a
  brace expansion, ``~``, a comment, a leading ``VAR=value``, a shell keyword or builtin — is
  refused naming what it uses, unless ``allow_shell``: then it runs as ``[SHELL, "-c",
  command]``. An unescaped ``%`` (cron feeds what follows it to the command's stdin) is
  refused either way; ``\\%`` is a literal ``%``. Braces are doubled in the allow-list (its
  argv are templates).

Job names are ``<prefix>-<slug of the command>-<hash>``: the hash is of the user and the
command text, so editing a line's schedule keeps its job (re-importing upserts it), and
reordering the file changes nothing; the same command on two lines gets ``-2``, ``-3`` … in
file order. The same name is the command's name in the allow-list.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from duetime._types import RetryPolicy
from duetime.errors import ValidationError

NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""cron's nicknames and the 5 fields each stands for."""

NOT_PASSED_ON = frozenset({"CRON_TZ", "MAILTO", "MAILFROM"})
"""Assignments that configure cron itself, not the commands' environment."""

DEFAULT_SHELL = "/bin/sh"
MAX_SLUG = 40
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_SLUG_DROP = re.compile(r"[^a-z0-9]+")
_BRACES = re.compile(r"\{[^{}\s]*(,|\.\.)[^{}\s]*\}")
_SHELL_WORDS = frozenset(
    {
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
        "esac", "function", "{", "}", "!", "[[", "]]", "cd", "exec", "source", ".", "export",
        "set", "unset", "eval", "ulimit", "umask", "trap", "wait", "time",
    }
)  # fmt: skip
_OPERATORS = {
    "|": "a pipe (|)",
    "&": "a control operator (& or &&)",
    ";": "a command separator (;)",
    ">": "a redirection (>)",
    "<": "a redirection (<)",
    "(": "a subshell or grouping (parentheses)",
    ")": "a subshell or grouping (parentheses)",
    "`": "a command substitution (backticks)",
    "$": "a variable expansion or substitution ($)",
    "*": "a glob (*)",
    "?": "a glob (?)",
    "[": "a glob ([…])",
    "\n": "a newline",
}


@dataclass(frozen=True)
class Refused:
    """A line that cannot be imported: its number, its text and why."""

    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}: {self.text.strip()}"


@dataclass
class CrontabImport:
    """What a crontab becomes (module docstring): ``specs`` in file order, ``commands`` (name
    → a ``DUETIME_COMMANDS`` entry), ``notes`` on what was not carried over, ``refused``
    lines (nothing of a crontab with refused lines should be imported unless the operator
    says so)."""

    specs: list[dict[str, Any]] = field(default_factory=list)
    commands: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


def convert(
    text: str,
    *,
    tz: str | None = None,
    system: bool = False,
    allow_shell: bool = False,
    prefix: str = "cron",
    like_cron: bool = False,
) -> CrontabImport:
    """Translate the crontab ``text`` (module docstring).

    ``tz``: the zone of lines before any ``CRON_TZ`` (cron's is the machine's); such a line
    without ``tz`` is refused. ``system``: the lines have a user column (``/etc/crontab``,
    ``/etc/cron.d/*``). ``like_cron``: the jobs keep cron's behaviour — an occurrence missed
    while down never runs, a new run starts while the last one runs, no retry — instead of
    duetime's defaults. Raises ValidationError for a bad ``prefix`` only; a bad
    line is in ``refused``. The cron expressions and zones are not checked here (this layer
    knows no schedules): :func:`duetime.app.importing.crontab` does, refusing those lines."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}", prefix):
        raise ValidationError("--prefix", "must be 1-40 letters, digits, '_', '.' or '-'")
    result = CrontabImport()
    env: dict[str, str] = {}
    zone = tz
    shell = DEFAULT_SHELL
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines_of(text), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        assignment = _ASSIGNMENT.match(raw)
        if assignment and not line.startswith("@"):
            name, value = assignment.group(1), _unquote(assignment.group(2))
            if name == "CRON_TZ":
                zone = value
                continue
            if name in ("MAILTO", "MAILFROM"):
                result.notes.append(
                    f"line {number}: {name}={value} is not carried over: duetime mails no "
                    "output; a run keeps its output's tail, and a run that fails for good "
                    "raises an alert (DUETIME_ALERT_WEBHOOKS, docs/observability.md)"
                )
                continue
            if name == "SHELL":
                shell = value or DEFAULT_SHELL
            if name == "TZ":
                result.notes.append(
                    f"line {number}: TZ={value} is passed to the commands' environment; it "
                    "does not change when they run (CRON_TZ or --tz does)"
                )
            env[name] = value
            continue
        try:
            cron, user, command = _entry(raw, system=system)
            if zone is None:
                raise ValueError(
                    "no time zone: the crontab sets no CRON_TZ before this line (cron uses "
                    "the machine's zone); pass --tz with that zone"
                )
            argv = _argv(command, shell=shell, allow_shell=allow_shell)
        except ValueError as exc:
            result.refused.append(Refused(number, raw, str(exc)))
            continue
        name = _name(prefix, user, command, seen)
        allowed: dict[str, Any] = {"argv": [_template(a) for a in argv]}
        passed = {k: v for k, v in env.items() if k not in NOT_PASSED_ON}
        if passed:
            allowed["env"] = passed
        if env.get("HOME"):
            allowed["cwd"] = env["HOME"]
        result.commands[name] = allowed
        spec: dict[str, Any] = {
            "name": name,
            "target": {"type": "command", "name": name},
            "cron": cron,
            "tz": zone,
            "metadata": {"crontab_line": number} | ({"crontab_user": user} if user else {}),
        }
        if like_cron:
            spec |= {"misfire": "skip", "overlap": "allow", "retry": RetryPolicy(max_attempts=1)}
        result.specs.append(spec)
    if system and result.specs:
        result.notes.append(
            "the user column is kept as the jobs' metadata (crontab_user): commands run as "
            "the worker's user, whoever the crontab named"
        )
    return result


def lines_of(text: str) -> list[str]:
    """The crontab's lines as cron reads them: split at newlines only (``str.splitlines``
    would also split at form feeds, vertical tabs and Unicode separators inside a command)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _entry(raw: str, *, system: bool) -> tuple[str, str | None, str]:
    """(cron expression, user or None, command text) of a schedule line; ValueError says
    what is wrong."""
    line = raw.strip()
    if line.startswith("@"):
        nickname, rest = [*line.split(None, 1), ""][:2]
        nickname = nickname.lower()
        if nickname == "@reboot":
            raise ValueError(
                "@reboot runs when cron starts; duetime has no such event (run it from the "
                "service that needs it, e.g. a systemd unit's ExecStartPre)"
            )
        if nickname not in NICKNAMES:
            raise ValueError(f"{nickname} is not a cron nickname (known: {', '.join(NICKNAMES)})")
        cron, fields_wanted = NICKNAMES[nickname], 0
    else:
        cron, fields_wanted, rest = "", 5, line
    parts = rest.split(None, fields_wanted + (1 if system else 0))
    needed = fields_wanted + (1 if system else 0) + 1
    if len(parts) < needed:
        what = "five time fields" if fields_wanted else "a nickname"
        raise ValueError(
            f"expected {what}{', a user' if system else ''} and a command"
            + ("" if system else " (a system crontab with a user column needs --system)")
        )
    if fields_wanted:
        cron = " ".join(parts[:fields_wanted])
    user = parts[fields_wanted] if system else None
    return cron, user, parts[-1]


def _argv(command: str, *, shell: str, allow_shell: bool) -> list[str]:
    """The argv running ``command`` (module docstring); ValueError says why it cannot."""
    text, percent = _percent(command)
    if percent:
        raise ValueError(
            "an unescaped % (cron sends the text after it to the command's stdin; duetime "
            "gives commands no stdin): move that input into a script, or write \\% for a "
            "literal %"
        )
    if "\0" in text:
        raise ValueError("a NUL byte in the command (no program can receive one in an argument)")
    unclosed = _unclosed_quote(text)
    if unclosed:
        raise ValueError(f"{unclosed}: neither a shell nor duetime can split this command")
    reason = shell_reason(text)
    if reason is None:
        argv = shlex.split(text)
        if argv:
            return argv
        reason = "an empty command"
    if allow_shell:
        return [shell, "-c", text]
    raise ValueError(f"needs a shell: {reason} (rewrite it as a script, or pass --allow-shell)")


def _unclosed_quote(command: str) -> str | None:
    """``"an unclosed ' quote"`` (or ``"``) when the command's quotes do not close by POSIX
    rules, else None. A quote inside a shell comment counts too: such a line is refused
    even though a shell would run it (rewrite the comment)."""
    quote: str | None = None
    i = 0
    while i < len(command):
        char = command[i]
        if quote == "'":
            quote = None if char == "'" else quote
        elif char == "\\":
            i += 1
        elif quote == '"':
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
        i += 1
    return None if quote is None else f"an unclosed {quote} quote"


def _percent(command: str) -> tuple[str, bool]:
    """The command with ``\\%`` made ``%``, and whether an unescaped ``%`` remains."""
    out: list[str] = []
    i = 0
    while i < len(command):
        if command.startswith("\\%", i):
            out.append("%")
            i += 2
            continue
        if command[i] == "%":
            return command, True
        out.append(command[i])
        i += 1
    return "".join(out), False


def shell_reason(command: str) -> str | None:
    """What makes ``command`` need a shell (the first thing found), or None when splitting it
    into words (:func:`shlex.split`) gives what ``sh -c`` would run."""
    quote: str | None = None
    word_start = True
    i = 0
    while i < len(command):
        char = command[i]
        if quote == "'":
            if char == "'":
                quote = None
        elif quote == '"':
            if char == "\\" and command[i + 1 : i + 2] in ("$", "`"):
                return "a \\$ or \\` inside double quotes"
            if char == "\\":
                i += 1
            elif char == '"':
                quote = None
            elif char in "$`":
                return _OPERATORS[char]
        elif char == "\\":
            i += 1
        elif char in "'\"":
            quote = char
        elif char in _OPERATORS:
            return _OPERATORS[char]
        elif char == "{" and _BRACES.match(command, i):
            return "a brace expansion ({a,b} in bash)"
        elif word_start and char == "~":
            return "a home directory expansion (~)"
        elif word_start and char == "#":
            return "a shell comment (#)"
        word_start = char.isspace()
        i += 1
    if quote is not None:
        return f"an unclosed {quote} quote"
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return str(exc)
    if words and _ASSIGNMENT.match(words[0]) and "=" in words[0]:
        return f"a variable assignment before the command ({words[0].split('=')[0]}=…)"
    if words and words[0] in _SHELL_WORDS:
        return f"the shell keyword or builtin {words[0]!r}"
    return None


def _template(arg: str) -> str:
    """An argv element as a literal in the allow-list's template syntax."""
    return arg.replace("{", "{{").replace("}", "}}")


def _name(prefix: str, user: str | None, command: str, seen: dict[str, int]) -> str:
    """A stable job (and command) name for ``command`` (module docstring)."""
    program, _, rest = command.strip().partition(" ")
    slug = _SLUG_DROP.sub("-", f"{program.rsplit('/', 1)[-1]} {rest}".lower()).strip("-")
    slug = slug[:MAX_SLUG].rstrip("-") or "command"
    digest = hashlib.sha256(f"{user or ''}\0{command}".encode()).hexdigest()[:8]
    base = f"{prefix}-{slug}-{digest}"
    seen[base] = seen.get(base, 0) + 1
    return base if seen[base] == 1 else f"{base}-{seen[base]}"
