"""Who may change the engine command from the browser: whoever can read the machine's terminal.

The engine command is a program the lab runs on this machine (Check engine runs its interpreter at
once; every run starts it), so Settings changes it only with the token that the launcher
(`make run`, ui/serve.py) printed on its terminal when it started, as Jupyter does. An app started
without the launcher has no token, and the browser cannot change the command at all. The CLI and
TUNING_LAB_ENGINE_COMMAND need no token: the terminal is the trust boundary. Each approved and
each refused change is one line on the terminal (stderr) and in the lab home's logs/settings.log.
"""

from __future__ import annotations

import hmac
import secrets
import sys
import threading
from typing import TextIO

from core.clock import now_iso
from core.redact import scrub_text
from tuning.settings import Settings, lab_home

# The settings that decide which program the lab runs on this machine.
GUARDED = ("engine_command",)
_FROM_TERMINAL = "or set TUNING_LAB_ENGINE_COMMAND in the terminal that starts the app"
_lock = threading.Lock()
_token: str | None = None  # this process's token: set once by the launcher, never stored


def issue() -> str:
    """A fresh token for this app process (the launcher calls it once, before serving)."""
    global _token
    with _lock:
        _token = secrets.token_urlsafe(24)
        return _token


def revoke() -> None:
    """No token: the browser cannot change guarded settings (an app started without launcher)."""
    global _token
    with _lock:
        _token = None


def announce(token: str, stream: TextIO | None = None) -> None:
    """The terminal's line, printed by the launcher next to Streamlit's URL."""
    out = stream if stream is not None else sys.stdout
    print(
        f"\n  Changing the engine command from the browser (Settings) asks for this terminal "
        f"token:\n  {token}\n",
        file=out,
        flush=True,
    )


def guarded_changes(saved: Settings, form: Settings) -> list[str]:
    """The guarded settings that `form` changes from `saved`."""
    return [n for n in GUARDED if getattr(form, n).strip() != getattr(saved, n).strip()]


def token_problem(given: str) -> str:
    """ "" when `given` is this app's terminal token, else why not (one line naming the field)."""
    with _lock:
        token = _token
    if token is None:
        return (
            "terminal token: this app was started without one (start it with `make run`), "
            + _FROM_TERMINAL
        )
    if not given.strip():
        return "terminal token: empty; paste the token `make run` printed in its terminal"
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return "terminal token: wrong; paste the one `make run` printed in its terminal"
    return ""


def approve(action: str, saved: Settings, form: Settings, given: str) -> str:
    """ "" when `action` ("save", "check") may use `form`: no guarded setting changes, or the token
    is right; else why not. Each guarded change, approved or refused, is logged."""
    changed = guarded_changes(saved, form)
    if not changed:
        return ""
    problem = token_problem(given)
    record(action, saved, form, changed, problem)
    return problem


def record(action: str, saved: Settings, form: Settings, changed: list[str], problem: str) -> None:
    """One line per guarded change: stderr, and appended to logs/settings.log (secrets scrubbed;
    a log that cannot be written is said on stderr, not fatal)."""
    what = "; ".join(
        f"{n} {scrub_text(getattr(saved, n))!r} -> {scrub_text(getattr(form, n))!r}"
        for n in changed
    )
    verdict = f"refused ({problem})" if problem else "approved with the terminal token"
    line = f"{now_iso()} settings {action} from the browser: {what}: {verdict}"
    print(f"tuning lab: {line}", file=sys.stderr, flush=True)
    path = lab_home() / "logs" / "settings.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
    except OSError as exc:
        print(f"tuning lab: {path} cannot be written ({exc.strerror})", file=sys.stderr)
