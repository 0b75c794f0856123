"""Live commands: `attach PID`, `run -- CMD...`, `collect PID -o FILE.tar.gz`.

Each handler builds a `Watcher` and hands it to a `Session` (attach, run) or samples it a few
times (collect). The sinks (`--serve`, Slack, webhooks, `--history`) hang off the session.
"""

from __future__ import annotations

import functools
import inspect
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from hangwatch.cli.preflight import preflight_before_launch
from hangwatch.cli.session import Session, SessionOptions, parse_exit_on
from hangwatch.errors import TargetError
from hangwatch.model import Verdict
from hangwatch.watch.observation import Observation

__all__ = ["attach", "run", "collect"]

LogOpt = Annotated[Path | None, typer.Option("--log", help="The server's log file (default: found from its stdout/stderr).")]
RunLogOpt = Annotated[Path | None, typer.Option("--log", help="Where to keep the server's output (default: ./hangwatch-run-<time>.log).")]
RulesOpt = Annotated[list[Path] | None, typer.Option("--rules", help="Extra rule directory or file (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON verdict per line, each time it changes.")]
ExitOnOpt = Annotated[str | None, typer.Option("--exit-on", help="Exit when the state is one of these, e.g. ready,stalled,crashed: 0 on ready, 1 otherwise.")]
TimeoutOpt = Annotated[float | None, typer.Option("--timeout", help="Give up after S seconds (exit 1, printing the verdict).")]
IntervalOpt = Annotated[float, typer.Option("--interval", help="Seconds between ticks.", min=0.1)]
NativeOpt = Annotated[bool, typer.Option("--native/--no-native", help="Allow native stacks of a stalled server: each pauses that rank for up to ~1 s, at most once a minute.")]
ServeOpt = Annotated[bool, typer.Option("--serve", help="Serve the HTTP API (verdict, stacks, metrics, bundle).")]
HostOpt = Annotated[str, typer.Option("--host", help="API address.")]
PortOpt = Annotated[int, typer.Option("--port", help="API port.")]
TokenOpt = Annotated[str | None, typer.Option("--token", envvar="HANGWATCH_TOKEN", help="Bearer token the API requires (prefer HANGWATCH_TOKEN or --token-file: argv is readable by every local user).")]
TokenFileOpt = Annotated[Path | None, typer.Option("--token-file", envvar="HANGWATCH_TOKEN_FILE", help="File holding the bearer token (first line).")]
InsecureOpt = Annotated[bool, typer.Option("--insecure", help="Allow a non-loopback API without a token.")]
SlackOpt = Annotated[str | None, typer.Option("--slack-webhook", envvar="HANGWATCH_SLACK_WEBHOOK", help="Slack incoming webhook URL for stall alerts (the URL is a secret: prefer the variable or --slack-webhook-file).")]
SlackFileOpt = Annotated[Path | None, typer.Option("--slack-webhook-file", envvar="HANGWATCH_SLACK_WEBHOOK_FILE", help="File holding the Slack webhook URL.")]
WebhookOpt = Annotated[str | None, typer.Option("--webhook", envvar="HANGWATCH_WEBHOOK", help="URL to POST verdict alerts to as JSON (prefer HANGWATCH_WEBHOOK or --webhook-file).")]
WebhookFileOpt = Annotated[Path | None, typer.Option("--webhook-file", envvar="HANGWATCH_WEBHOOK_FILE", help="File holding the webhook URL.")]
PublicOpt = Annotated[str | None, typer.Option("--public-url", envvar="HANGWATCH_PUBLIC_URL", help="The API's URL as alert readers reach it (links in alerts).")]
NoPreflightOpt = Annotated[bool, typer.Option("--no-preflight", help="Skip the preflight checks before the launch.")]
StrictOpt = Annotated[bool, typer.Option("--preflight-strict", help="Do not launch when the preflight finds a critical problem (exit 1).")]
HistoryOpt = Annotated[Path | None, typer.Option("--history", help="SQLite file for verdict transitions, alerts and past starts (default for past starts: $XDG_STATE_HOME/hangwatch/history.sqlite).")]
LaunchLabelOpt = Annotated[str | None, typer.Option("--launch-label", envvar="HANGWATCH_LAUNCH_LABEL", help="The multi-node start this node belongs to, the same on every node (default: from the engine's --dist-init-addr/--nnodes); exported in /metrics for `hangwatch fleet --prometheus`.")]
LearnOpt = Annotated[bool, typer.Option("--learn/--no-learn", help="Learn phase budgets and the ETA from past starts of the same setup (kept in the history file).")]
RemedyOpt = Annotated[bool, typer.Option("--remedy", help="On a stall or crash whose cause has a known-safe launch change (docs/remedy.md), stop the server and relaunch it with exactly that change.")]
MaxRelaunchOpt = Annotated[int, typer.Option("--max-relaunches", min=0, help="With --remedy: relaunch at most N times.")]


def _load_rules(extra: list[Path] | None) -> list[Any]:
    from hangwatch.classify import RULES_DIR, load_rules

    return load_rules([RULES_DIR, *(extra or [])])


def _options(opts: WatchOptions) -> SessionOptions:
    try:
        states = parse_exit_on(opts.exit_on)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--exit-on") from None
    return SessionOptions(json=opts.json_out, exit_on=states, timeout_s=opts.timeout, interval_s=opts.interval)


def _config(log: Path | None, interval: float, native: bool, **extra: Any) -> Any:
    from hangwatch.watch import WatchConfig
    from hangwatch.watch.ladder import LadderConfig

    return WatchConfig(interval_s=interval, ladder=LadderConfig(native=native),
                       log_path=str(log) if log else None, **extra)


@dataclass(frozen=True)
class WatchOptions:
    """The options `attach` and `run` share, declared once: the typer parameters below are made
    from these fields (`_SHARED`), and each command receives them as one value."""

    rules: list[Path] | None = None
    json_out: bool = False
    exit_on: str | None = None
    timeout: float | None = None
    interval: float = 1.0
    native: bool = True
    serve: bool = False
    host: str = "127.0.0.1"
    port: int = 9464
    token: str | None = None
    insecure: bool = False
    slack_webhook: str | None = None
    webhook: str | None = None
    public_url: str | None = None
    history: Path | None = None
    token_file: Path | None = None
    webhook_file: Path | None = None
    slack_webhook_file: Path | None = None
    learn: bool = True
    launch_label: str | None = None

    def with_secret_files(self) -> WatchOptions:
        """hangwatch's own secrets read from their files (`--token-file` ...): never needed in argv."""
        values: dict[str, Any] = {}
        for name in ("token", "webhook", "slack_webhook"):
            path = getattr(self, f"{name}_file")
            if path is None:
                continue
            if getattr(self, name):
                flag = name.replace("_", "-")
                raise typer.BadParameter(f"give --{flag} or --{flag}-file, not both", param_hint=f"--{flag}-file")
            values[name] = read_secret_file(path)
        return replace(self, **values) if values else self


def read_secret_file(path: Path) -> str:
    """The first line of a secret file, stripped; a missing or empty file is one clear error."""
    from hangwatch.userfile import read_user_file

    try:
        text = read_user_file(path, 64 << 10).decode("utf-8").strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(f"cannot read the secret file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text or not text[0].strip():
        raise TargetError(f"the secret file {path} is empty")
    return text[0].strip()


_SHARED = {
    "rules": RulesOpt, "json_out": JsonOpt, "exit_on": ExitOnOpt, "timeout": TimeoutOpt, "interval": IntervalOpt,
    "native": NativeOpt, "serve": ServeOpt, "host": HostOpt, "port": PortOpt, "token": TokenOpt,
    "insecure": InsecureOpt, "slack_webhook": SlackOpt, "webhook": WebhookOpt, "public_url": PublicOpt,
    "history": HistoryOpt, "token_file": TokenFileOpt, "webhook_file": WebhookFileOpt,
    "slack_webhook_file": SlackFileOpt, "learn": LearnOpt, "launch_label": LaunchLabelOpt,
}  # fmt: skip


def with_watch_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command the shared options: typer sees them as parameters after the command's own,
    the command gets them as `opts: WatchOptions`."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "opts"]
    shared = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=_SHARED[f.name], default=f.default)
              for f in fields(WatchOptions)]

    @functools.wraps(command)
    def handler(*args: Any, **kwargs: Any) -> None:
        opts = WatchOptions(**{f.name: kwargs.pop(f.name) for f in fields(WatchOptions)}).with_secret_files()
        command(*args, opts=opts, **kwargs)

    handler.__signature__ = inspect.Signature(own + shared)  # type: ignore[attr-defined]
    return handler


@with_watch_options
def attach(
    pid: Annotated[int, typer.Argument(help="Any pid of the server: its launcher, a scheduler, a worker.")],
    log: LogOpt = None, *, opts: WatchOptions,
) -> None:
    """Watch a running server start and say why it is stuck, live.

    Not our process, so never relaunched: on a stall or crash with a known-safe change
    (docs/remedy.md) the exact relaunch command is printed instead."""
    from hangwatch.cli.remedy import attach_hint
    from hangwatch.sources.discover import discover
    from hangwatch.watch import Watcher
    from hangwatch.watch.remedies import shipped_remedies

    options = _options(opts)
    shipped_remedies()  # read at start, as the rules are: a tick never opens a data file (out of fds, say)
    store = _open_store(opts.history, opts.learn)
    config = _config(log, opts.interval, opts.native, learn=opts.learn)
    server = discover(pid)
    watcher = Watcher(server, _load_rules(opts.rules), config, book=store if opts.learn else None)
    said: set[str] = set()
    with _Sinks(watcher, store, opts) as sinks:
        hint = functools.partial(attach_hint, cmdline=server.cmdline, engine=server.engine, err=sys.stderr, said=said)
        code = Session(watcher, options, sinks=[*sinks.callbacks, lambda _obs, verdict: hint(verdict)]).run()
    raise typer.Exit(code)


@with_watch_options
def run(
    cmd: Annotated[list[str], typer.Argument(help="The server command, after --.", metavar="-- CMD...")],
    log: RunLogOpt = None, no_preflight: NoPreflightOpt = False, preflight_strict: StrictOpt = False,
    remedy: RemedyOpt = False, max_relaunches: MaxRelaunchOpt = 2, *, opts: WatchOptions,
) -> None:
    """Start a server and watch it from its first second; Ctrl-C stops it.

    First the preflight checks the host and the command (`hangwatch preflight`) and prints what it
    finds; its findings are evidence for the verdict and are served at /preflight.

    With --exit-on, hangwatch exits once the state is reached: a ready server keeps running
    (its output stays in --log); a stalled one, or one still starting at --timeout, is stopped.

    With --remedy, a stall or crash whose cause has a known-safe launch change (docs/remedy.md)
    stops the server and relaunches it with exactly that change, at most --max-relaunches times.
    """
    from hangwatch.cli.launch import default_log_path
    from hangwatch.cli.remedy import RemedyLoop, setup_key
    from hangwatch.cli.session import EXIT_RELAUNCH
    from hangwatch.watch.remedies import shipped_remedies

    options = _options(opts)
    log_path = log or default_log_path()
    existed = log_path.exists() and log_path.stat().st_size > 0
    rule_set = _load_rules(opts.rules)
    shipped_remedies()  # read at start, as the rules are: a tick never opens a data file
    report = None if no_preflight else preflight_before_launch(cmd, strict=preflight_strict, rules=opts.rules)
    store = _open_store(opts.history, opts.learn)
    loop = RemedyLoop(list(cmd), {}, max_relaunches, enabled=remedy, json_out=opts.json_out,
                      store=store, key=setup_key(cmd))
    loop.apply_learned()
    try:
        while True:
            child, code = _launch_and_watch(loop, log_path, existed, rule_set, report, store, options, opts)
            existed = True  # a relaunch appends to the same log: its watcher reads only the new part
            if code != EXIT_RELAUNCH:
                break
    finally:
        if store is not None:
            store.close()
    _report_exit(child, code, options)
    raise typer.Exit(code)


def _launch_and_watch(loop: Any, log_path: Path, existed: bool, rule_set: list[Any], report: Any, store: Any,
                      options: SessionOptions, opts: WatchOptions) -> tuple[Any, int]:
    """One launch of `loop.argv` watched to its end; a relaunch (--remedy) stops it first."""
    from hangwatch.cli.launch import launch
    from hangwatch.cli.remedy import env_for
    from hangwatch.cli.session import EXIT_RELAUNCH
    from hangwatch.watch import Watcher

    try:
        child = launch(loop.argv, log_path, env=env_for(loop.env))
    except OSError as exc:
        raise TargetError(f"cannot start {shlex.join(loop.argv)}: {exc.strerror or exc}") from exc
    child.install_forwarding()
    print(f"hangwatch: started pid {child.pid}, output in {log_path}", file=sys.stderr)
    # an existing --log file: watch only what this run appends
    config = _config(log_path, opts.interval, opts.native, initial_log_bytes=0 if existed else 8 << 20,
                     preflight=report.findings if report else (), learn=opts.learn)
    watcher = Watcher(run_server(child.pid, loop.argv, str(log_path)), rule_set, config, book=store if opts.learn else None)
    _watch_stops(child, watcher)
    with _Sinks(watcher, store, opts, preflight=report.to_dict() if report else None, keep_store=True) as sinks:
        code = Session(watcher, options, sinks=sinks.callbacks, child_pid=child.pid, pump=child.pump,
                       annotate=loop.annotate, handoff=loop.handoff).run()
        if code == EXIT_RELAUNCH:
            loop.relaunch(child.popen, watcher.view.server_name, watcher.observed_for(), sinks.dispatcher)
    return child, code


def _watch_stops(child: Any, watcher: Any) -> None:
    """Ctrl-C or SIGTERM to `hangwatch run` is a stop asked for: the server's exit is `stopped`."""

    def note(signum: int) -> None:
        watcher.note_stop(f"hangwatch run got {signal.Signals(signum).name} and passed it to the server")

    child.on_stop = note
    if child.stopped_by is not None:  # a signal came before the watcher was built
        note(child.stopped_by)


def _open_store(history: Path | None, learn: bool) -> Any:
    """The SQLite history: --history, else the default file for past starts when learning (the
    session's transitions and alerts then live in memory, _Sinks._store). A default file that
    cannot be opened costs only the learning."""
    from hangwatch.cli.remedy import default_history_path
    from hangwatch.sinks.store import HistoryStore

    if history is not None:
        return _recovered(HistoryStore.open_or_recover(str(history)))
    if learn:
        path = default_history_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return _recovered(HistoryStore.open_or_recover(str(path)))
        except Exception as exc:  # OSError, sqlite3.Error: a read-only or full home
            print(f"hangwatch: warning: cannot keep past starts in {path}: {exc}", file=sys.stderr)
    return None


def _server_gone(episode: Any) -> bool:
    """The server an episode of the history file belongs to is gone: its launcher pid is not
    running, or runs a process started after the episode (the pid was reused)."""
    import psutil

    from hangwatch.watch.server import server_pid

    pid = server_pid(episode.server)
    if pid is None:
        return False  # a label hangwatch did not write: leave it
    try:
        return psutil.Process(pid).create_time() > episode.started + 1.0
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False  # another user's process: it runs


def _recovered(opened: tuple[Any, str | None]) -> Any:
    store, notice = opened
    if notice:
        from hangwatch.redact import terminal_text

        print(f"hangwatch: warning: {terminal_text(notice)}", file=sys.stderr)
    return store


def _report_exit(child: Any, code: int, options: SessionOptions) -> None:
    status = child.popen.poll()
    if status is None:
        if code != 0:  # gave up (stalled, timeout): do not leave a wedged server behind
            print(f"hangwatch: stopping pid {child.pid}", file=sys.stderr)
            child.stop()
        return
    child.reap_group()
    print(f"hangwatch: server pid {child.pid} exited with status {status}", file=sys.stderr)


def run_server(pid: int, cmd: list[str], log_path: str) -> Any:
    """The Server for a command we started: known without discovery (it may be a wrapper script)."""
    from hangwatch.engines import env_prefixes, server_port
    from hangwatch.parse.flags import parse_flags
    from hangwatch.redact import filter_env, redact_cmdline
    from hangwatch.sources.discover import Server, launcher_engine

    cmdline = redact_cmdline(shlex.join(cmd))
    flags = parse_flags(cmdline)
    engine = launcher_engine(cmdline)
    port = server_port(flags, engine) or 0
    host = flags.get("host")
    # engine None: not known from the command (a wrapper script); the watcher guesses it from the log
    return Server(engine=engine, launcher_pid=pid, cmdline=cmdline, flags=flags,
                  host=host if isinstance(host, str) and host else "127.0.0.1", port=port, log_path=log_path,
                  env=filter_env(dict(os.environ), env_prefixes()))


def collect(
    pid: Annotated[int, typer.Argument(help="Any pid of the server.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The bundle to write (.tar.gz, or a directory).")],
    samples: Annotated[int, typer.Option("--samples", min=1, max=20, help="Stack and GPU samples to take.")] = 3,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between samples.")] = 1.0,
    log: LogOpt = None, rules: RulesOpt = None,
) -> None:
    """Write an evidence bundle of a running server (several samples over a few seconds)."""
    from hangwatch.sources.discover import discover
    from hangwatch.watch import Watcher

    # a bundle is read with the quiet time it records and no hold floor: collect's own verdict
    # must be the one `diagnose` will give for the file it writes
    watcher = Watcher(discover(pid), _load_rules(rules), _config(log, interval, native=False, min_hold_s=0.0))
    verdict = _sample(watcher, samples, interval)
    _write_bundle(watcher.bundle_files(), output)
    watcher.close()
    print(f"wrote {output}: {verdict.state.value}" + (f" ({verdict.cause})" if verdict.cause else ""))


def _sample(watcher: Any, samples: int, interval: float) -> Verdict:
    _, verdict = watcher.tick()
    for n in range(samples):
        watcher.sample_stacks_now()
        if n + 1 < samples:
            time.sleep(interval)
        _, verdict = watcher.tick()
    return verdict


def _write_bundle(files: dict[str, bytes], output: Path) -> None:
    from hangwatch.bundle import bundle_tarball_bytes, write_bundle

    if output.name.endswith((".tar.gz", ".tgz")):
        output.write_bytes(bundle_tarball_bytes(files))
    else:
        write_bundle(files, output)


# ---------------------------------------------------------------- sinks


class _Sinks:
    """The HTTP API, alerts and history of one session; started on enter, stopped on exit."""

    def __init__(self, watcher: Any, store: Any, opts: WatchOptions, preflight: dict[str, Any] | None = None,
                 keep_store: bool = False):
        self.watcher, self.store, self.serve, self.host, self.port = watcher, store, opts.serve, opts.host, opts.port
        self.keep_store = keep_store  # `run` closes it after its last launch (a relaunch reuses it)
        self.dispatcher: Any = None
        self.preflight = preflight  # the report served at /preflight (`run` only)
        self.token, self.insecure, self.slack, self.webhook = opts.token, opts.insecure, opts.slack_webhook, opts.webhook
        self.public_url, self.history, self.launch_label = opts.public_url, opts.history, opts.launch_label
        self.callbacks: list[Callable[[Observation, Verdict], None]] = []
        self._closers: list[Callable[[], None]] = []

    def __enter__(self) -> _Sinks:
        try:
            store = self._store()
            self._alerts(store)
            if self.serve:
                self._api(store)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for close in reversed(self._closers):
            try:
                close()
            except Exception as error:  # a sink failing on the way out must not hide the verdict
                print(f"hangwatch: warning: {error}", file=sys.stderr)
        self.watcher.close()

    def _store(self) -> Any:
        from hangwatch.sinks.store import HistoryStore

        if self.store is not None and not self.keep_store:
            self._closers.append(self.store.close)
        if self.history is not None:  # --history FILE: past starts, transitions, episodes and alerts
            self.store.close_gone(_server_gone)
            return self.store
        if not (self.slack or self.webhook or self.serve):
            return None
        # the default file keeps past starts only (docs/serving.md): this session's transitions,
        # episodes and alerts live in memory, so no other server's ever shows here
        memory = HistoryStore(":memory:")
        self._closers.append(memory.close)
        return memory

    def _alerts(self, store: Any) -> None:
        if store is None:
            return
        from hangwatch.sinks.alerts import (
            AlertDispatcher,
            SlackSink,
            WebhookSink,
            slack_client,
        )

        sinks: list[Any] = []
        if self.slack:
            sinks.append(SlackSink(slack_client(self.slack), self.public_url))
        if self.webhook:
            sinks.append(WebhookSink(self.webhook))
        from hangwatch.sinks.launchid import launch_of
        from hangwatch.sources.location import read_location

        # where, for a reader of many nodes' alerts: the machine, and the multi-node start it belongs to
        server = self.watcher.server
        launch = launch_of(server.engine, server.flags, self.launch_label)
        where = read_location().label() + (f" · launch {launch.launch}" if launch.launch else "") + (
            f" node {launch.node_rank}" if launch.launch and launch.node_rank else "")
        dispatcher = self.dispatcher = AlertDispatcher(sinks, store, where=where)
        _resume_open_episode(self.watcher, store)
        self.callbacks.append(lambda observation, verdict: dispatcher.on_verdict(verdict, observation.server.name))

        def close() -> None:
            dispatcher.flush(5.0)
            dispatcher.close()

        self._closers.append(close)

    def _api(self, store: Any) -> None:
        from hangwatch.sinks.api import create_app, serve_in_thread
        from hangwatch.sinks.launchid import AgentLabels

        agent = AgentLabels(launch_label=self.launch_label)
        app_ = create_app(self.watcher.view, token=self.token, store=store, preflight=self.preflight, agent=agent)
        handle = serve_in_thread(app_, self.host, self.port, token=self.token, insecure=self.insecure)
        agent.set_url(self.public_url or handle.url)  # a fleet reads the agent's details there
        print(f"hangwatch: API on {handle.url}", file=sys.stderr)
        self._closers.append(handle.stop)


def _resume_open_episode(watcher: Any, store: Any) -> None:
    """A daemon restarted mid-stall carries on the episode its history left open for this server,
    so its first look (no baseline yet) neither resolves it nor alerts again (docs/live.md)."""
    from hangwatch.model import StallEpisode
    from hangwatch.redact import redacted

    episode = store.open_episode(redacted(watcher.view.server_name))
    if episode is not None and episode.state == "stalled":
        watcher.resume_episode(StallEpisode(episode.id, episode.started, "stalled", episode.cause))
