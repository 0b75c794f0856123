"""Alerts: one message per stall episode, a resolved message on recovery, delivered in the background.

Delivery is an outbox in the history's SQLite file: every alert is stored with its payload before
the first attempt and retried with capped backoff until a peer answers 2xx, across restarts (a
restarted daemon resumes what it still owes). A 3xx is never followed (urllib would turn the POST
into a GET and report the other page's 200) and never counts as sent; `Retry-After` is honoured up
to `RetryPolicy.max_retry_after_s`; every copy of one alert carries the same `Idempotency-Key`
(`<episode>:<kind>`), and the client waits `DELIVERY_TIMEOUT_S`, longer than slow peers need; after
a timeout the peer may have the message, so it is sent again only after `RetryPolicy.after_timeout_s`
(at least once, docs/serving.md). Text that comes from the server (log lines, names) is escaped for
Slack's mrkdwn: a log line cannot `<!channel>` or disguise a link.

    AlertDispatcher.on_verdict  (watch loop; O(1), never blocks)
        └── decision thread: transitions and episodes in the HistoryStore, which alerts are due
              └── one delivery thread per sink: retries with backoff, 429 honours Retry-After

An episode starts when the state becomes stalled or crashed and ends when it leaves both (the live
loop keeps a stall stalled until real progress, docs/live.md, so "resolved" means the server moved).
A cause refined inside the episode (a new cause with higher confidence) sends one "cause refined". Its id
is persisted, with one delivery record per (episode, sink, kind), so a daemon restarted after
kill -9 neither loses history nor alerts again for an episode it already alerted. Incoming Slack
webhooks cannot edit a message (no `ts` comes back), so "resolved" is a second message.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from http.client import HTTPResponse
from typing import Any, Protocol

from slack_sdk.webhook import WebhookClient

from hangwatch.model import State, Verdict
from hangwatch.redact import redact_string, redact_url, redacted, redacted_verdict
from hangwatch.sinks.report import STATE_ICONS, duration_text, fact_line, headline, missing_text, ranks_text
from hangwatch.sinks.store import HistoryStore

__all__ = [
    "Alert", "AlertDispatcher", "DeliveryError", "RetryPolicy", "AlertSink", "SlackSink", "WebhookSink",
    "slack_client", "slack_message",
]

log = logging.getLogger(__name__)

ALERTING = (State.STALLED, State.CRASHED)


@dataclass(frozen=True)
class Alert:
    kind: str  # "firing" | "resolved"
    server: str
    episode_id: str
    verdict: dict[str, Any]  # redacted Verdict.to_dict(); for "resolved", the verdict that ended the episode
    at: float  # when the dispatcher decided it
    started: float  # when the episode began
    episode_state: str = "stalled"  # the alerting state the episode began in
    where: str | None = None  # the machine: "gpu-node-3 (10.0.0.5)", "pod llm/sglang-0 on node gpu-7 (...)"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class DeliveryError(Exception):
    """A failed post. `permanent`: retrying cannot help (400/403/404); `retry_after`: the peer's wish."""

    def __init__(self, reason: str, *, permanent: bool = False, retry_after: float | None = None,
                 maybe_delivered: bool = False) -> None:
        super().__init__(redact_string(reason))
        self.permanent, self.retry_after = permanent, retry_after
        self.maybe_delivered = maybe_delivered  # timed out waiting for the answer: the peer may have it


class AlertSink(Protocol):
    name: str

    def send(self, alert: Alert) -> None:
        """Deliver once or raise DeliveryError; retries are the dispatcher's job."""
        ...


DELIVERY_TIMEOUT_S = 30.0  # per attempt; Slack answers in < 1 s, a slow relay in seconds


def slack_client(url: str, *, timeout: float = DELIVERY_TIMEOUT_S) -> WebhookClient:
    """A WebhookClient without slack-sdk's own retries (ours run in the background and are recorded)
    and without following redirects."""
    return _NoRedirectClient(url, timeout=int(max(1, timeout)), retry_handlers=[])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError(3xx): reported as the status it is


class _NoRedirectClient(WebhookClient):
    """slack-sdk's client with an opener that never follows a redirect (the SDK has no option for it)."""

    def _perform_http_request_internal(self, url: str, req: urllib.request.Request) -> Any:
        if not url.lower().startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {redact_url(url)}")
        handlers: list[Any] = [_NoRedirect(), urllib.request.HTTPSHandler(context=self.ssl)]
        if isinstance(self.proxy, str):
            handlers.append(urllib.request.ProxyHandler({"http": self.proxy, "https": self.proxy}))
        response: HTTPResponse = urllib.request.build_opener(*handlers).open(req, timeout=self.timeout)
        charset = response.headers.get_content_charset() or "utf-8"
        from slack_sdk.webhook import WebhookResponse

        return WebhookResponse(url=url, status_code=response.status, body=response.read().decode(charset),
                               headers=dict(response.headers.items()))


class SlackSink:
    """Posts Block Kit messages through a slack-sdk `WebhookClient` it is handed."""

    def __init__(self, client: WebhookClient, public_url: str | None = None, *, name: str = "slack") -> None:
        self.client, self.public_url, self.name = client, public_url, name

    def send(self, alert: Alert) -> None:
        _post(self.client, slack_message(alert, self.public_url), alert)


class WebhookSink:
    """POSTs `{"event", "server", "where", "episode_id", "at", "started", "verdict"}` as JSON to any URL."""

    def __init__(self, url: str, *, timeout: float = DELIVERY_TIMEOUT_S, name: str = "webhook") -> None:
        self.client, self.name = slack_client(url, timeout=timeout), name

    def send(self, alert: Alert) -> None:
        body = {"event": alert.kind.split(":", 1)[0], "server": alert.server, "where": alert.where,
                "episode_id": alert.episode_id, "at": alert.at,
                "started": alert.started, "verdict": alert.verdict}
        _post(self.client, body, alert)


def _post(client: WebhookClient, body: dict[str, Any], alert: Alert | None = None) -> None:
    headers = {"Idempotency-Key": f"{alert.episode_id}:{alert.kind}"} if alert is not None else None
    try:
        response = client.send_dict(body, headers=headers)
    except Exception as exc:  # urllib/http.client/socket errors: refused, reset, timeout, garbage status line
        if _timed_out(exc):
            raise DeliveryError(f"timed out waiting for the answer ({type(exc).__name__}): {_UNCONFIRMED}",
                                maybe_delivered=True) from exc
        raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc
    _check(response.status_code, response.headers or {}, response.body or "")


_UNCONFIRMED = "the peer may have it"


def _timed_out(exc: BaseException) -> bool:
    """A read or connect timeout, however urllib wraps it. A connect timeout never reached the
    peer, but urllib reports both alike, so both count as "may have arrived": the safe side."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, TimeoutError) or "timed out" in str(exc):
            return True
        exc = getattr(exc, "reason", None) or exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def _check(status: int, headers: dict[str, Any], body: str) -> None:
    if 200 <= status < 300:
        return
    if status == 429:
        raise DeliveryError("HTTP 429 rate limited", retry_after=_retry_after(headers))
    reason = f"HTTP {status}: {body[:200]!r}"
    if 300 <= status < 400:  # a moved webhook: posting elsewhere is the operator's call, not ours
        raise DeliveryError(f"HTTP {status} redirect (not followed; fix the URL)", permanent=True)
    # 408 and 5xx may pass; other 4xx (invalid_payload, no_service, bad token) will not.
    raise DeliveryError(reason, permanent=400 <= status < 500 and status != 408)


def _retry_after(headers: dict[str, Any]) -> float | None:
    for key, value in headers.items():
        if key.lower() == "retry-after":
            value = value[0] if isinstance(value, list) else value
            try:
                return max(0.0, float(value))
            except (TypeError, ValueError):
                return None  # an HTTP-date or garbage: fall back to our own backoff
    return None


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int | None = None  # None: until delivered (the outbox keeps it across restarts)
    base_s: float = 1.0
    cap_s: float = 60.0
    max_retry_after_s: float = 300.0  # a peer asking for longer is retried after this long
    # After a timeout the peer may have the message and be slow: a copy sent at once would be a
    # duplicate page (Slack ignores Idempotency-Key). Sent again only after this long.
    after_timeout_s: float = 900.0

    def delay(self, attempt: int, error: DeliveryError) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to give up (a permanent error)."""
        if error.permanent or (self.attempts is not None and attempt >= self.attempts):
            return None
        if error.maybe_delivered:
            return self.after_timeout_s
        if error.retry_after is not None:
            return min(error.retry_after, self.max_retry_after_s)
        backoff = min(self.cap_s, self.base_s * 2 ** min(attempt - 1, 30))
        return backoff * random.uniform(0.8, 1.2)  # jitter: many agents must not retry in step


class _SinkWorker:
    """One thread per sink, FIFO: a slow Slack never delays the generic webhook, nor the loop."""

    def __init__(self, sink: AlertSink, store: HistoryStore, policy: RetryPolicy, stop: threading.Event) -> None:
        self.sink, self._store, self._policy, self._stop = sink, store, policy, stop
        self.queue: queue.Queue[Alert] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name=f"hangwatch-alert-{sink.name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                alert = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self._deliver(alert)
            except Exception:  # a bug in a sink must not kill the thread that serves later episodes
                log.exception("alert sink %s failed", self.sink.name)
            finally:
                self.queue.task_done()

    def _deliver(self, alert: Alert) -> None:
        if alert.kind == "resolved" and self._store.alert_status(alert.episode_id, self.sink.name) != "sent":
            self._record(alert, "skipped", 0, "the firing alert never reached this sink")
            return
        attempt = self._unconfirmed_attempts(alert)
        while not self._stop.is_set():
            attempt += 1
            try:
                self.sink.send(alert)
            except DeliveryError as error:
                wait = self._policy.delay(attempt, error)
                detail = str(error) if wait is None or not error.maybe_delivered else f"{error}; not sent again for {wait:.0f} s"
                self._record(alert, "failed" if wait is None else "pending", attempt, detail)
                if wait is None or self._stop.wait(wait):
                    return
                continue
            self._record(alert, "sent", attempt, None)
            return

    def _unconfirmed_attempts(self, alert: Alert) -> int:
        """An alert an earlier run left timed out (resumed from the outbox): wait out the rest of
        `after_timeout_s` before sending it again, so a restart does not undo the wait. Returns the
        attempts already made."""
        record = self._store.alert_record(alert.episode_id, self.sink.name, alert.kind)
        if record is None or record.status != "pending" or _UNCONFIRMED not in (record.detail or ""):
            return record.attempts if record is not None else 0
        left = record.at + self._policy.after_timeout_s - time.time()
        if left > 0:
            self._stop.wait(left)
        return record.attempts

    def _record(self, alert: Alert, status: str, attempts: int, detail: str | None) -> None:
        self._store.record_alert(alert.episode_id, self.sink.name, alert.kind, status, attempts=attempts,
                                 detail=detail)


class AlertDispatcher:
    """Decides stall episodes from verdicts and hands alerts to the sinks' delivery threads."""

    def __init__(
        self,
        sinks: Sequence[AlertSink],
        store: HistoryStore | None = None,
        *,
        policy: RetryPolicy = RetryPolicy(),
        clock: Callable[[], float] = time.time,
        where: str | None = None,
    ) -> None:
        self.store = store if store is not None else HistoryStore(":memory:")
        self._where = where
        self._clock = clock
        self._stop = threading.Event()
        self._workers = [_SinkWorker(sink, self.store, policy, self._stop) for sink in sinks]
        self._inbox: queue.Queue[tuple[Verdict, str, float]] = queue.Queue(maxsize=1000)
        self._seen: dict[str, tuple[str, str | None]] = {}  # server -> last key enqueued (loop thread only)
        self._submitted: set[tuple[str, str, str]] = set()  # (episode, sink, kind) handed over in this process
        self._resume()
        self._thread = threading.Thread(target=self._run, name="hangwatch-alerts", daemon=True)
        self._thread.start()

    def _resume(self) -> None:
        """Hand the workers what an earlier run of this history still owes (killed mid-retry, receiver down)."""
        for worker in self._workers:
            try:
                owed = self.store.owed_alerts(worker.sink.name)
            except Exception:  # an unreadable outbox must not stop new alerts
                log.exception("cannot read the alert outbox")
                continue
            for payload in owed:
                alert = Alert(**payload)
                self._submitted.add((alert.episode_id, worker.sink.name, alert.kind))
                worker.queue.put(alert)

    def on_verdict(self, verdict: Verdict, server: str) -> None:
        """Called by the watch loop every tick; only a change of (state, cause) goes further."""
        key = (verdict.state.value, verdict.cause)
        if self._seen.get(server) == key:
            return
        try:
            self._inbox.put_nowait((verdict, server, self._clock()))
            self._seen[server] = key
        except queue.Full:  # the decision thread is wedged (disk?): drop rather than stall the loop
            log.warning("alert inbox full; dropped a verdict for %s", server)

    def relaunch(self, verdict: Verdict, server: str, relaunch: dict[str, Any], number: int, timeout: float = 5.0) -> None:
        """One message per relaunch (`hangwatch run --remedy`), in the episode of the stall or crash
        that caused it: `relaunch` ({cause, change, argv, ...}) rides in the verdict body."""
        deadline = time.monotonic() + timeout
        while self._inbox.unfinished_tasks and time.monotonic() < deadline:  # the stall's own decision first
            time.sleep(0.01)
        server, at = redacted(server), self._clock()
        body = {**redacted_verdict(verdict), "relaunch": redacted(relaunch)}
        episode = self.store.open_episode(server) or self.store.start_episode(server, verdict.state.value, verdict.cause, at=at)
        kind = f"relaunch:{number}"
        self._submit(kind, Alert(kind, server, episode.id, body, at, episode.started, episode.state))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued verdict is decided and every alert delivered or given up."""
        deadline = time.monotonic() + timeout
        queues = [self._inbox] + [w.queue for w in self._workers]
        while time.monotonic() < deadline:
            if all(q.unfinished_tasks == 0 for q in queues):
                return True
            time.sleep(0.01)
        return False

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        for thread in [self._thread] + [w.thread for w in self._workers]:
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                verdict, server, at = self._inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self._decide(verdict, server, at)
            except Exception as exc:
                # a full disk, a locked file: forget this verdict was seen, so the next tick offers it again
                log.warning("alert decision failed for %s (retried next tick): %s", server, exc)
                self._seen.pop(server, None)
            finally:
                self._inbox.task_done()

    def _decide(self, verdict: Verdict, server: str, at: float) -> None:
        body = redacted_verdict(verdict)
        server = redacted(server)
        episode = self.store.open_episode(server)
        if episode is not None and verdict.state is State.STARTING:
            return  # a (re)started watcher's first look knows nothing yet: the open episode stands (no false "resolved")
        if verdict.state in ALERTING:
            live_id = verdict.episode.id if verdict.episode else None
            episode = episode or self.store.start_episode(server, verdict.state.value, verdict.cause, at=at,
                                                          episode_id=live_id)
            self._transition(verdict, server, at, body, episode.id)
            self._submit("firing", Alert("firing", server, episode.id, body, at, episode.started, episode.state,
                                where=self._where))
            self._refined(verdict, server, at, body, episode)
        elif episode is not None:
            # transition first: if a write fails (full disk) the episode is still open, so the retry resolves it
            self._transition(verdict, server, at, body, episode.id)
            self.store.end_episode(episode.id, at=at)
            self._submit("resolved", Alert("resolved", server, episode.id, body, at, episode.started, episode.state,
                                where=self._where))
        else:
            self._transition(verdict, server, at, body, None)

    def _refined(self, verdict: Verdict, server: str, at: float, body: dict[str, Any], episode: Any) -> None:
        """One "cause refined" message per new cause the live loop settled on with more confidence
        (docs/live.md): a cause it merely saw, weaker than the one given, sends nothing."""
        live = verdict.episode
        if live is None or not live.refined or verdict.cause != live.refined[-1].cause:
            return
        last = live.refined[-1]
        if self.store.refine_episode(episode.id, last.cause, last.confidence, at=at):
            kind = f"refined:{last.cause}"  # one delivery record per refined cause
            self._submit(kind, Alert(kind, server, episode.id, body, at, episode.started, episode.state,
                                where=self._where))

    def _transition(self, verdict: Verdict, server: str, at: float, body: dict[str, Any], episode_id: str | None) -> None:
        last = self.store.last_transition(server)
        if last is not None and (last.state, last.cause) == (verdict.state.value, verdict.cause):
            return  # the same verdict seen again after a restart: history already has it
        self.store.record_transition(
            server, verdict.state.value, prev_state=last.state if last else None, cause=verdict.cause,
            rule=verdict.rule, phase=body["phase"], episode_id=episode_id, verdict=body, at=at)

    def _submit(self, kind: str, alert: Alert) -> None:
        for worker in self._workers:
            key = (alert.episode_id, worker.sink.name, kind)
            status = self.store.alert_status(alert.episode_id, worker.sink.name, kind)
            # "sent"/"failed"/"skipped" are final; None or "pending" (killed mid-retry) still owe a post.
            if key in self._submitted or status not in (None, "pending"):
                continue
            self.store.put_outbox(alert.episode_id, worker.sink.name, kind, alert.to_dict())
            self.store.record_alert(alert.episode_id, worker.sink.name, kind, "pending", at=alert.at)
            self._submitted.add(key)
            worker.queue.put(alert)


# ---------------------------------------------------------------- Slack Block Kit

_SECTION_MAX = 3000  # Slack: section text
_HEADER_MAX = 150  # Slack: header plain_text
_MAX_BLOCKS = 50
_FACTS_SHOWN = 8


def slack_message(alert: Alert, public_url: str | None = None) -> dict[str, Any]:
    """`{"text", "blocks"}` for one alert, inside Slack's limits; stacks are linked, never inlined."""
    alert = _escaped(alert)  # every string below comes from the server or its log: no live mrkdwn in it
    if alert.kind.startswith("refined"):
        blocks = _refined_blocks(alert)
    elif alert.kind.startswith("relaunch"):
        blocks = _relaunch_blocks(alert)
    else:
        blocks = _firing_blocks(alert) if alert.kind == "firing" else _resolved_blocks(alert)
    blocks += _links(public_url)
    blocks.append(_context(f"episode `{alert.episode_id}` · hangwatch · {_when(alert.at)}"))
    return {"text": _fallback(alert), "blocks": blocks[:_MAX_BLOCKS]}


def _escaped(alert: Alert) -> Alert:
    return replace(alert, server=mrkdwn_escape(alert.server), verdict=_escape_all(alert.verdict),
                   where=None if alert.where is None else mrkdwn_escape(alert.where))


def _who(alert: Alert) -> str:
    """The machine first: with many nodes, which one is the question a reader asks before any other."""
    return f"{alert.where} · {alert.server}" if alert.where else alert.server


def _escape_all(value: Any) -> Any:
    if isinstance(value, str):
        return mrkdwn_escape(value)
    if isinstance(value, dict):
        return {k: _escape_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_all(v) for v in value]
    return value


def mrkdwn_escape(text: str) -> str:
    """Slack's three control characters: `<!channel>`, `<https://x|label>` and `&` entities become plain text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _firing_blocks(alert: Alert) -> list[dict[str, Any]]:
    v = alert.verdict
    state = v["state"]
    blocks = [_header(f"{STATE_ICONS.get(state, '')} {_who(alert)}: {headline(state, None)}")]
    fields = [
        f"*Cause*\n`{v['cause'] or 'unknown'}` ({v['confidence_label']}, {v['confidence']})",
        f"*Phase*\n{v['phase'] or 'unknown'}",
        f"*Culprit ranks*\n{ranks_text(v['ranks'])}",
        f"*Stalled for*\n{duration_text(v['since_s'])}",
        f"*Rule*\n`{v['rule'] or '-'}`",
    ]
    blocks.append({"type": "section", "fields": [_mrkdwn(f, 2000) for f in fields]})
    if v["title"] or v["message"]:
        blocks.append(_section(f"*{v['title'] or ''}*\n{v['message'] or ''}"))
    if v["evidence"]:
        blocks.append(_section("*Deciding evidence*\n" + _facts(v["evidence"])))
    if v["remedy"]:
        blocks.append(_section(f"*Remedy*\n{v['remedy']}"))
    if v["missing"]:
        blocks.append(_context(f"Not collected: {missing_text(v['missing'])}"))
    return blocks


def _refined_blocks(alert: Alert) -> list[dict[str, Any]]:
    """Still the same stall; only its cause is now better known."""
    v = alert.verdict
    blocks = [_header(f"{STATE_ICONS.get(v['state'], '')} {_who(alert)}: cause refined to {v['cause']}")]
    before = [r["cause"] for r in ((v.get("episode") or {}).get("refined") or [])][:-1]
    text = (f"Still {v['state']} (episode started {duration_text(alert.at - alert.started)} ago). The cause is now "
            f"`{v['cause']}` ({v['confidence_label']}, {v['confidence']})" + (f", after {', '.join(before)}" if before else "")
            + ".")
    blocks.append(_section(text))
    if v["title"] or v["message"]:
        blocks.append(_section(f"*{v['title'] or ''}*\n{v['message'] or ''}"))
    if v["remedy"]:
        blocks.append(_section(f"*Remedy*\n{v['remedy']}"))
    return blocks


def _relaunch_blocks(alert: Alert) -> list[dict[str, Any]]:
    """hangwatch stopped the server and starts it again with one known-safe change."""
    v, r = alert.verdict, alert.verdict.get("relaunch") or {}
    blocks = [_header(f"{STATE_ICONS.get(v['state'], '')} {_who(alert)}: relaunching with {r.get('what', '?')}")]
    text = (f"The server was *{v['state']}* (`{v['cause']}`, {v['confidence_label']}). hangwatch stopped it and "
            f"starts it again with exactly one change: `{r.get('what', '?')}`.\n*Cost*: {r.get('cost', 'unknown')}")
    blocks.append(_section(text))
    if r.get("argv"):
        blocks.append(_section("*Command*\n```" + _clip(" ".join(r["argv"]), 2500) + "```"))
    return blocks


def _resolved_blocks(alert: Alert) -> list[dict[str, Any]]:
    v = alert.verdict
    text = (f"The {alert.episode_state} episode is over after {duration_text(alert.at - alert.started)}; "
            f"the server is now *{v['state']}* (phase {v['phase'] or 'unknown'}).")
    return [_header(f"{STATE_ICONS['resolved']} {_who(alert)}: RESOLVED"), _section(text)]


def _links(public_url: str | None) -> list[dict[str, Any]]:
    if not public_url:
        return []
    base = redact_url(public_url).rstrip("/")
    buttons = [{"type": "button", "text": {"type": "plain_text", "text": label}, "url": f"{base}{path}"}
               for label, path in (("Page", "/"), ("Verdict", "/verdict"), ("Bundle (.tar.gz)", "/bundle"), ("Stacks", "/stacks"))]
    return [{"type": "actions", "elements": buttons}]


def _fallback(alert: Alert) -> str:
    v = alert.verdict
    if alert.kind == "resolved":
        return f"{_who(alert)}: resolved, now {v['state']}"
    if alert.kind.startswith("refined"):
        return _clip(f"{_who(alert)}: still {v['state']}; cause refined to {v['cause']}", 300)
    if alert.kind.startswith("relaunch"):
        return _clip(f"{_who(alert)}: {v['state']} ({v['cause']}); relaunching with {(v.get('relaunch') or {}).get('what')}", 300)
    return _clip(f"{_who(alert)}: {v['state']} in {v['phase'] or 'unknown phase'}: {v['cause'] or 'unknown cause'}", 300)


def _facts(facts: list[dict[str, str]], budget: int = _SECTION_MAX - 100) -> str:
    """Bullets for the first facts that fit the section; the rest are counted, not cut mid-line."""
    lines: list[str] = []
    for fact in facts[:_FACTS_SHOWN]:
        text, source = fact_line(fact)
        line = f"• {_clip(text, 300)} — `{_clip(source, 120)}`"
        if sum(len(x) + 1 for x in lines) + len(line) > budget:
            break
        lines.append(line)
    if len(lines) < len(facts):
        lines.append(f"… and {len(facts) - len(lines)} more in /verdict")
    return "\n".join(lines)


def _when(at: float) -> str:
    iso = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    return f"<!date^{int(at)}^{{date_short_pretty}} {{time_secs}}|{iso}>"


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": _clip(text, _HEADER_MAX), "emoji": True}}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text, _SECTION_MAX)}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_mrkdwn(text, 2000)]}


def _mrkdwn(text: str, limit: int) -> dict[str, str]:
    return {"type": "mrkdwn", "text": _clip(text, limit)}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
