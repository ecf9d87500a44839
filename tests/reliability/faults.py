"""Fault injection: kill Mnemo at a random moment of its work, restart it, check that nothing was
lost or doubled.

Each round runs one scenario of `tests.reliability.fault_worker` in a child process (a chat turn,
the memory jobs, an import, a backup, an export, a restore), waits for a random number of its
marker lines (what it has durably stored so far) plus a random fraction of a second, and sends
SIGKILL. Mnemo then starts again on the same profile, by turns the way the desktop app does
(`restart_gui`: its workers, crash recovery and memory jobs) and the way the terminal does
(`mnemo chat`, which recovers before the first turn), and the profile is checked:

- the database passes SQLite's integrity check and Mnemo's own (`check_integrity`);
- every user message the worker reported stored is there, with its text;
- every exchange with a reply (finished, stopped or cut short) has exactly one memory page once
  the pending jobs have run (none lost, none doubled), and no job is left pending or failed;
- an import run again after the kill leaves what one clean import makes, nothing twice;
- every backup Mnemo lists is a sound database; a restore leaves the old memory or the backup.

`run(kills, seed)` returns a `Tally` (rounds go on until `kills` workers were killed before they finished); `python -m tests.bench.fault_injection` prints it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("turn", "jobs", "import", "backup", "export", "restore")
WEIGHTS = {"turn": 4, "jobs": 3, "import": 2, "backup": 1, "export": 1, "restore": 1}
# how many marker lines a scenario prints when it runs to the end (the kill falls among them)
MARKERS = {"turn": 36, "jobs": 13, "import": 5, "backup": 3, "export": 3, "restore": 3}
CHILD_DEADLINE_S = 240.0
SETTINGS = {"chat": {"max_tokens": 40, "n_ctx": 2048}, "backup_keep": 2}


@dataclass
class Round:
    scenario: str
    restart: str  # "gui" or "cli"
    markers_seen: int = 0
    finished: bool = False  # the worker ended before the kill
    problems: list[str] = field(default_factory=list)
    lost_messages: int = 0
    lost_memory: int = 0
    duplicates: int = 0
    integrity_ok: bool = True


@dataclass
class Tally:
    rounds: list[Round] = field(default_factory=list)

    @property
    def kills(self) -> int:
        return sum(1 for r in self.rounds if not r.finished)

    def summary(self) -> dict:
        return {
            "rounds": len(self.rounds),
            "kills": self.kills,
            "by_scenario": dict(Counter(r.scenario for r in self.rounds)),
            "by_restart": dict(Counter(r.restart for r in self.rounds)),
            "lost_user_messages": sum(r.lost_messages for r in self.rounds),
            "lost_memory": sum(r.lost_memory for r in self.rounds),
            "duplicates": sum(r.duplicates for r in self.rounds),
            "integrity_failures": sum(not r.integrity_ok for r in self.rounds),
            "other_problems": [p for r in self.rounds for p in r.problems],
        }

    @property
    def ok(self) -> bool:
        s = self.summary()
        return (
            not (s["lost_user_messages"] or s["lost_memory"] or s["duplicates"] or s["integrity_failures"])
            and not s["other_problems"]
        )


def profile(root: Path, scenario: str) -> dict[str, str]:
    """The environment of the scenario's own profile under `root` (made on first use)."""
    data, config = root / scenario / "data", root / scenario / "config"
    if not config.exists():
        config.mkdir(parents=True)
        (config / "settings.json").write_text(json.dumps(SETTINGS))
    data.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MNEMO_DATA_DIR=str(data), MNEMO_CONFIG_DIR=str(config), QT_QPA_PLATFORM="offscreen")
    env["OPENBLAS_NUM_THREADS"] = "1"
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _python(*args: str, env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True
    )


def kill_during(scenario: str, env, rng: random.Random, markers: int) -> tuple[list[str], bool]:
    """Run the scenario's worker and SIGKILL it after a random number of its markers (of the
    `markers` a whole run prints); returns the marker lines it printed, and whether it finished
    before the kill came."""
    proc = _python("-m", "tests.reliability.fault_worker", scenario, env=env)
    assert proc.stdout is not None
    target = rng.randint(0, max(0, markers - 2))
    lines: list[str] = []
    deadline = time.monotonic() + CHILD_DEADLINE_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith("READY") and target == 0 or len(lines) > target:
            break
    time.sleep(rng.random() * 0.3)  # the kill lands anywhere between two markers
    finished = proc.poll() is not None
    if not finished:
        proc.send_signal(signal.SIGKILL)
    try:
        rest, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, err = proc.communicate()
    lines += [x.strip() for x in rest.splitlines()]
    finished = finished or "FINISHED" in lines
    if finished and proc.returncode not in (0, None) and "FINISHED" not in lines:
        raise RuntimeError(f"the {scenario} worker failed on its own: {err[-2000:]}")
    return lines, finished


def restart(how: str, env) -> list[str]:
    """Start Mnemo again on the profile: the desktop app's start path or the terminal's."""
    if how == "gui":
        proc = _python("-m", "tests.reliability.restart_gui", env=env)
        out, err = proc.communicate(timeout=CHILD_DEADLINE_S + 60)
        if "STORE ok" not in out:
            return [f"the app's start failed: {out.strip()} {err.strip()[-500:]}"]
        return []
    proc = _python("-m", "app.cli", "chat", env=env, stdin=subprocess.PIPE)
    out, err = proc.communicate("/quit\n", timeout=CHILD_DEADLINE_S)
    if proc.returncode != 0:
        return [f"mnemo chat failed ({proc.returncode}): {err.strip()[-500:]}"]
    return []


def check(scenario: str, env, lines: list[str], before: dict, rnd: Round) -> None:
    """The profile after the restart: what must hold whatever moment the kill came (module docstring)."""
    from app.context import AppContext

    os.environ.update({k: env[k] for k in ("MNEMO_DATA_DIR", "MNEMO_CONFIG_DIR")})
    ctx = AppContext.create()
    store = ctx.open_store()
    try:
        ok = store.db.scalar("PRAGMA integrity_check") == "ok"
        problems = store.check_integrity()
        rnd.integrity_ok = ok and not problems
        rnd.problems += [f"{scenario}: {p}" for p in problems]
        store.jobs.run_pending(allow_llm=False)  # what the restart left (the LLM's own jobs wait for it)
        left = store.db.rows("SELECT kind, status, error FROM job WHERE status IN ('pending', 'failed')")
        rnd.problems += [f"{scenario}: job {k} {s} {e or ''}" for k, s, e in left if k != "promote_segment"]
        for line in lines:
            if line.startswith("POSTED "):
                msg = store.conversations.get_message(int(line.split()[1]))
                rnd.lost_messages += msg is None or not msg.content
        _check_exchanges(store, rnd)
        if scenario == "import":
            _check_import(store, rnd, before["clean_import"])
        if scenario == "backup":
            _check_backups(ctx, rnd)
        if scenario == "restore":
            now = store.db.scalar("SELECT count(*) FROM message")
            if now not in before["restore_counts"]:
                rnd.problems.append(f"restore: {now} messages, expected one of {sorted(before['restore_counts'])}")
        if scenario == "export":
            _check_exports(ctx, rnd)
    finally:
        store.close()


def _check_exchanges(store, rnd: Round) -> None:
    """Every reply with text has one page (memory neither lost nor doubled); each user message once."""
    rows = store.db.rows(
        "SELECT m.id, m.status, c.incognito, c.memory_paused, c.source FROM message m "
        "JOIN conversation c ON c.id = m.conversation_id "
        "WHERE m.role = 'assistant' AND trim(m.content) != '' AND m.status != 'failed'"
    )
    pages = Counter(
        aid for (aid,) in store.db.rows("SELECT assistant_message_id FROM page WHERE assistant_message_id IS NOT NULL")
    )
    for aid, _status, incognito, paused, source in rows:
        if incognito or paused or source:  # imports make their pages themselves (checked apart)
            continue
        rnd.lost_memory += pages[aid] == 0
    rnd.duplicates += sum(n - 1 for n in pages.values() if n > 1)
    left = store.db.scalar("SELECT count(*) FROM message WHERE status IN ('streaming', 'pending')")
    if left:
        rnd.problems.append(f"{left} message(s) still 'streaming' or 'pending' after the restart")
    rnd.duplicates += store.db.scalar(
        "SELECT count(*) FROM (SELECT 1 FROM message WHERE role = 'user' "
        "GROUP BY conversation_id, parent_id, content HAVING count(*) > 1)"
    )


def _check_import(store, rnd: Round, clean: dict[str, int]) -> None:
    """Run the import again (as a user would after a crash): the profile then holds what one clean
    import makes, each conversation, message and page once."""
    from app.context import AppContext
    from app.importers.job import ImportJob, run_import

    from .fault_worker import FIXTURE

    job = run_import(AppContext.create(), ImportJob(FIXTURE))
    if job.phase != "done":
        rnd.problems.append(f"import: the second import {job.phase}: {job.error}")
    store.jobs.run_pending(allow_llm=False)
    got = imported_counts(store)
    if got != clean:
        rnd.duplicates += max(0, sum(got.values()) - sum(clean.values()))
        rnd.problems.append(f"import: {got} after the kill and a second import, {clean} from one clean import")


def imported_counts(store) -> dict[str, int]:
    """Conversations, messages and pages that came from imports."""
    return {
        "conversations": store.db.scalar("SELECT count(*) FROM conversation WHERE source IS NOT NULL"),
        "messages": store.db.scalar(
            "SELECT count(*) FROM message WHERE conversation_id IN (SELECT id FROM conversation WHERE source IS NOT NULL)"
        ),
        "pages": store.db.scalar(
            "SELECT count(*) FROM page WHERE conversation_id IN (SELECT id FROM conversation WHERE source IS NOT NULL)"
        ),
    }


def clean_import(env) -> dict[str, int]:
    """What one uninterrupted import of the fixture makes, in a profile of its own."""
    from app.context import AppContext
    from app.importers.job import ImportJob, run_import

    from .fault_worker import FIXTURE

    os.environ.update({k: env[k] for k in ("MNEMO_DATA_DIR", "MNEMO_CONFIG_DIR")})
    ctx = AppContext.create()
    job = run_import(ctx, ImportJob(FIXTURE))
    assert job.phase == "done", job.error
    store = ctx.open_store()
    try:
        store.jobs.run_pending(allow_llm=False)
        return imported_counts(store)
    finally:
        store.close()


def _check_backups(ctx, rnd: Round) -> None:
    from app.operations.backups import UnusableBackupError, check, list_backups

    for b in list_backups(ctx.paths):
        try:
            check(b)
        except UnusableBackupError as exc:
            rnd.problems.append(f"backup: {b.name} is listed but unusable: {exc}")


def _check_exports(ctx, rnd: Round) -> None:
    for f in ctx.paths.data_dir.glob("export-*.json"):
        try:
            json.loads(f.read_text(encoding="utf-8"))
        except ValueError as exc:
            rnd.problems.append(f"export: {f.name} is a partial file: {exc}")


def seed_restore(env) -> set[int]:
    """A profile for the restore scenario: a backup, then more messages; returns the message
    counts a restore may leave (the backup's, or the current one)."""
    from app.context import AppContext
    from app.operations.backups import make_backup

    os.environ.update({k: env[k] for k in ("MNEMO_DATA_DIR", "MNEMO_CONFIG_DIR")})
    ctx = AppContext.create()
    store = ctx.open_store()
    try:
        cid = store.conversations.create_conversation("Before the backup")
        store.conversations.add_message(cid, "user", "A message kept in the backup.")
        make_backup(store, ctx.paths, keep=2)
        store.conversations.add_message(cid, "user", "A message written after the backup.")
        return {1, store.db.scalar("SELECT count(*) FROM message")}
    finally:
        store.close()


def run(kills: int, seed: int = 0, *, root: Path, scenarios=SCENARIOS, log=None) -> Tally:
    """Rounds over `scenarios` (weighted: chat turns and memory jobs most, each one at least once)
    until `kills` of them were killed before their worker finished, restarting by turns through the
    app's start path and the terminal's."""
    rng = random.Random(seed)
    tally = Tally()
    restore_counts: set[int] = set()
    clean: dict[str, int] = {}
    markers = dict(MARKERS)  # how many marker lines a whole run prints: learnt from runs that finished
    order = [s for s in scenarios for _ in range(WEIGHTS[s])]
    i = 0
    while tally.kills < kills and i < 3 * kills + len(scenarios):
        scenario = scenarios[i] if i < len(scenarios) else rng.choice(order)
        env = profile(root, scenario)
        if scenario == "restore" and not restore_counts:
            restore_counts = seed_restore(env)
        if scenario == "import" and not clean:
            clean = clean_import(profile(root, "import-clean"))
        rnd = Round(scenario, "gui" if i % 2 == 0 else "cli")
        lines, rnd.finished = kill_during(scenario, env, rng, markers[scenario])
        if rnd.finished:
            markers[scenario] = len(lines)
        rnd.markers_seen = len(lines)
        rnd.problems += restart(rnd.restart, env)
        check(scenario, env, lines, {"restore_counts": restore_counts, "clean_import": clean}, rnd)
        tally.rounds.append(rnd)
        i += 1
        if log is not None:
            log(
                f"{i} ({tally.kills}/{kills} kills) {scenario} (restart: {rnd.restart}) after {rnd.markers_seen} "
                f"markers{' (finished first)' if rnd.finished else ''}: "
                f"lost {rnd.lost_messages}/{rnd.lost_memory}, dup {rnd.duplicates}, "
                f"integrity {'ok' if rnd.integrity_ok else 'FAILED'} {rnd.problems or ''}"
            )
    return tally
