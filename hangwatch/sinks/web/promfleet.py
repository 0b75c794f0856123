"""A fleet read from Prometheus: every node's state in a few queries, details only where it matters.

`hangwatch fleet --prometheus URL` asks the Prometheus that scrapes the agents for their
`hangwatch_agent_info` (URL, launch), `hangwatch_verdict_info` (state, phase, cause),
`hangwatch_seconds_since_progress`, `hangwatch_blocker_info` and `up`: five instant queries per
refresh whatever the fleet's size. Nodes are grouped by launch (the multi-node start they belong
to); within a launch `launch_apart()` names the node that differs. Only those nodes' agents are
then asked for their /snapshot (stacks, evidence, timeline, the merged tree), so a thousand
healthy nodes cost what three cost.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.errors import HangwatchError
from hangwatch.model import Phase
from hangwatch.sinks.web import page_data
from hangwatch.sinks.web.fleet import FleetError, apart, fetch_node, token_lines
from hangwatch.sources.prometheus import PrometheusClient, Sample, selector_matchers

__all__ = ["FleetNode", "PromFleet", "fleet_summary", "group_launches", "launch_apart", "nodes_from_samples",
           "read_nodes", "summary_text", "token_map"]

# most urgent first; "unreachable": Prometheus cannot scrape the agent; "waiting": no verdict yet
URGENCY = {"crashed": 0, "stalled": 1, "unreachable": 2, "starting": 3, "waiting": 4, "progressing": 5, "ready": 6}
_BAD = ("crashed", "stalled")
LOOKBACK = "10m"  # an agent seen this recently and gone since is a node that stopped answering


@dataclass(frozen=True)
class FleetNode:
    """One agent as Prometheus sees it."""

    instance: str  # host:port, as Prometheus scrapes it
    job: str
    host: str
    server: str
    url: str  # where its API answers (its own `url` label, else http://instance)
    launch: str  # the multi-node start ("" for a single-node server)
    node_rank: str
    nnodes: str
    state: str  # a verdict state, "unreachable" or "waiting"
    phase: str
    cause: str
    since_s: float | None
    blocker: str  # "TP1 waits on ...", "" when none

    @property
    def bad(self) -> bool:
        return self.state in _BAD


# ---------------------------------------------------------------- from Prometheus


def read_nodes(client: PrometheusClient, selector: str = "") -> list[FleetNode]:
    """Every agent the selector matches, seen in the last LOOKBACK: five instant queries, sent at once."""
    sel = "{" + selector_matchers(selector) + "}"
    seen = f"last_over_time(hangwatch_agent_info{sel}[{LOOKBACK}])"
    # an agent's labels change once as it starts (its URL once bound, its launch after the first
    # tick): the series it exports now wins over those it exported before
    queries = {"agents": f"hangwatch_agent_info{sel} or on (job, instance) {seen}",
               "verdicts": f"hangwatch_verdict_info{sel}",
               "since": f"hangwatch_seconds_since_progress{sel}", "blockers": f"hangwatch_blocker_info{sel}",
               "up": f"up and on (job, instance) {seen}"}
    with ThreadPoolExecutor(max_workers=len(queries), thread_name_prefix="hangwatch-promql") as pool:
        answers = dict(zip(queries, pool.map(client.query, queries.values()), strict=True))
    return nodes_from_samples(**answers)


def _key(labels: Mapping[str, str]) -> tuple[str, str]:
    return labels.get("job", ""), labels.get("instance", "")


def _agent_url(labels: Mapping[str, str]) -> str:
    """The agent's own URL, unless it names no reachable host (bound to 0.0.0.0): then the scrape's."""
    url = labels.get("url", "")
    host = urllib.parse.urlsplit(url).hostname if url else None
    if host and host not in ("0.0.0.0", "::"):
        return url
    return f"http://{labels.get('instance', '')}"


def nodes_from_samples(*, agents: Iterable[Sample], verdicts: Iterable[Sample], since: Iterable[Sample],
                       blockers: Iterable[Sample], up: Iterable[Sample]) -> list[FleetNode]:
    """The queries' answers joined on (job, instance): one FleetNode per agent."""
    verdict = {_key(s.labels): s.labels for s in verdicts}
    seconds = {_key(s.labels): s.value for s in since}
    blocker = {_key(s.labels): s.labels for s in blockers}
    scraped = {_key(s.labels): s.value for s in up}
    latest: dict[tuple[str, str], Mapping[str, str]] = {}
    for sample in agents:  # a gone agent's older label sets too: keep the one that says most
        key = _key(sample.labels)
        if key not in latest or _told(sample.labels) > _told(latest[key]):
            latest[key] = sample.labels
    nodes = []
    for key, labels in latest.items():
        v = verdict.get(key)
        if scraped.get(key) == 0 or (v is None and key not in scraped):
            state = "unreachable"
        else:
            state = v.get("state", "waiting") if v else "waiting"
        b = blocker.get(key) if state != "unreachable" else None
        nodes.append(FleetNode(
            instance=key[1], job=key[0], host=labels.get("host", ""), server=labels.get("server", ""),
            url=_agent_url(labels), launch=labels.get("launch", ""), node_rank=labels.get("node_rank", ""),
            nnodes=labels.get("nnodes", ""), state=state, phase=(v or {}).get("phase", ""),
            cause=(v or {}).get("cause", ""), since_s=seconds.get(key) if state != "unreachable" else None,
            blocker=(f"{b.get('rank') or 'pid ' + b.get('pid', '?')} waits on {b.get('waits_on', '')}".strip()
                     if b else "")))
    return sorted(nodes, key=lambda n: (n.launch, _rank_order(n.node_rank), n.instance))


def _told(labels: Mapping[str, str]) -> int:
    return sum(1 for name in ("url", "launch", "node_rank", "nnodes") if labels.get(name))


def _rank_order(rank: str) -> tuple[int, str]:
    return (int(rank), "") if rank.isdigit() else (1 << 30, rank)


# ---------------------------------------------------------------- which node stands apart (pure)


def _phase_order(phase: str) -> int | None:
    try:
        return Phase(phase).order
    except ValueError:
        return None


def _said(node: FleetNode) -> str:
    bits = [node.state] + ([node.cause] if node.cause else [])
    where = f" in {node.phase}" if node.phase else ""
    since = f" for {node.since_s:.0f} s" if node.since_s is not None and node.bad else ""
    return f"{': '.join(bits)}{where}{since}"


def launch_apart(nodes: Sequence[FleetNode]) -> tuple[list[str], str]:
    """(instances apart, why) within one launch, from what Prometheus holds, in this order of
    evidence: agents that no longer answer; node ranks with no agent at all; the only stalled or
    crashed node; the node furthest behind in the startup; the one cause no other node names.
    ([], why) when none differs (or the evidence does not tell them apart)."""
    if not nodes:
        return [], "no node"
    if len(nodes) == 1:
        n = nodes[0]
        return ([n.instance], f"{n.instance} is {_said(n)}") if n.bad or n.state == "unreachable" else ([], _said(n))
    down = [n for n in nodes if n.state == "unreachable"]
    if down and len(down) < len(nodes):
        names = ", ".join(n.instance for n in down)
        return [n.instance for n in down], f"its agent stopped answering Prometheus ({names}): up == 0 or no series"
    missing = _missing_ranks(nodes)
    if missing:
        return [], f"node rank{'s' if len(missing) > 1 else ''} {', '.join(missing)} of {nodes[0].nnodes} " \
                   "never showed up: no agent of that node is in Prometheus (not started, or not scraped)"
    bad = [n for n in nodes if n.bad]
    states = " / ".join(f"{c} {s}" for s, c in sorted(Counter(n.state for n in nodes).items(),
                                                        key=lambda item: URGENCY.get(item[0], 9)))
    if not bad:
        return [], f"no node stands apart: {len(nodes)} nodes, {states}"
    if len(bad) == 1:
        return [bad[0].instance], f"it alone is {_said(bad[0])}; the others: {states}"
    behind = _furthest_behind(nodes)
    if behind is not None:
        return [behind[0].instance], behind[1]
    causes = Counter(n.cause for n in bad)
    odd = [n for n in bad if n.cause and causes[n.cause] == 1]
    if len(odd) == 1 and len(bad) > 2:
        return [odd[0].instance], f"it alone names {odd[0].cause} ({_said(odd[0])}); the others {states}"
    return [], f"{len(bad)} of {len(nodes)} nodes are stalled or crashed alike ({states})"


def _missing_ranks(nodes: Sequence[FleetNode]) -> list[str]:
    counts = {n.nnodes for n in nodes if n.nnodes.isdigit()}
    ranks = {n.node_rank for n in nodes if n.node_rank.isdigit()}
    if len(counts) != 1 or len(ranks) != len(nodes):  # unknown, or ranks not all told apart
        return []
    expected = int(counts.pop())
    return [str(r) for r in range(expected) if str(r) not in ranks] if 0 < expected <= 4096 else []


def _furthest_behind(nodes: Sequence[FleetNode]) -> tuple[FleetNode, str] | None:
    ordered = sorted(((o, n) for n in nodes if (o := _phase_order(n.phase)) is not None), key=lambda p: p[0])
    if len(ordered) < 2 or ordered[0][0] == ordered[1][0]:
        return None
    (_, first), (_, second) = ordered[0], ordered[1]
    if not first.bad and not any(n.bad for n in nodes):
        return None
    return first, f"it is furthest behind, in {first.phase} ({_said(first)}), while the next reached {second.phase}"


# ---------------------------------------------------------------- launches and the summary


def _launch_name(node: FleetNode) -> str:
    return node.launch or node.instance


def group_launches(nodes: Sequence[FleetNode]) -> list[dict[str, Any]]:
    """One entry per launch, most urgent first: its nodes' states, the node apart and why."""
    groups: dict[str, list[FleetNode]] = defaultdict(list)
    for node in nodes:
        groups[_launch_name(node)].append(node)
    launches: list[dict[str, Any]] = []
    for name, members in groups.items():
        names, why = launch_apart(members)
        worst = min(members, key=lambda n: (URGENCY.get(n.state, 9), -(n.since_s or 0)))
        lead = next((n for n in members if n.instance in names), worst)
        members_sorted = sorted(members, key=lambda n: (n.instance not in names, URGENCY.get(n.state, 9),
                                                        -(n.since_s or 0), _rank_order(n.node_rank), n.instance))
        launches.append({
            "launch": name, "multi_node": bool(members[0].launch), "nodes": len(members),
            "nnodes": members[0].nnodes, "state": worst.state,
            "states": dict(sorted(Counter(n.state for n in members).items(), key=lambda i: URGENCY.get(i[0], 9))),
            "apart": names, "why": why, "cause": lead.cause, "phase": lead.phase,
            "since_s": max((n.since_s for n in members if n.bad and n.since_s is not None), default=None),
            "members": [_member(n) for n in members_sorted],
        })
    launches.sort(key=_urgency)
    return launches


def _urgency(g: Mapping[str, Any]) -> tuple[int, bool, float, str]:
    return URGENCY.get(g["state"], 9), not g["apart"], -(g["since_s"] or 0), g["launch"]


def _member(node: FleetNode) -> dict[str, Any]:
    # by hand: dataclasses.asdict deep-copies, a third of a 1,000-node refresh
    return {"instance": node.instance, "host": node.host, "server": node.server, "url": node.url,
            "node_rank": node.node_rank, "nnodes": node.nnodes, "state": node.state, "phase": node.phase,
            "cause": node.cause, "since_s": node.since_s, "blocker": node.blocker}


def _stalled_entry(node: FleetNode) -> dict[str, Any]:
    return {"instance": node.instance, "state": node.state, "cause": node.cause or None, "phase": node.phase or None,
            "since_s": None if node.since_s is None else round(node.since_s, 1), "launch": _launch_name(node),
            "node_rank": node.node_rank or None, "url": node.url}


def fleet_summary(nodes: Sequence[FleetNode], launches: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The `--json` object: {"nodes": N, "stalled": [...], "unreachable": [...], "launches": [...]}."""
    bad = sorted((n for n in nodes if n.bad), key=lambda n: (URGENCY[n.state], -(n.since_s or 0), n.instance))
    down = sorted(n.instance for n in nodes if n.state == "unreachable")
    return {"nodes": len(nodes), "states": dict(Counter(n.state for n in nodes)),
            "stalled": [_stalled_entry(n) for n in bad], "unreachable": down, "launches": list(launches)}


def summary_text(summary: Mapping[str, Any], *, healthy_shown: int = 0) -> list[str]:
    """The fleet in a few lines: a count, then each launch that is not healthy, the node apart first."""
    states = ", ".join(f"{c} {s}" for s, c in sorted(summary["states"].items(), key=lambda i: URGENCY.get(i[0], 9)))
    launches = summary["launches"]
    lines = [f"{summary['nodes']} nodes in {len(launches)} launches: {states or 'none'}"]
    calm = 0
    for g in launches:
        if g["state"] not in _BAD and g["state"] != "unreachable" and not g["apart"]:
            calm += 1
            if calm > healthy_shown:
                continue
        apart_text = f"node {', '.join(g['apart'])} stands apart: " if g["apart"] else ""
        lines.append(f"  {g['launch']} ({g['nodes']} node{'s' if g['nodes'] != 1 else ''}, {g['state'].upper()}): "
                     f"{apart_text}{g['why']}")
    if calm > healthy_shown:
        lines.append(f"  and {calm - healthy_shown} launch{'es' if calm - healthy_shown != 1 else ''} with no node apart")
    return lines


# ---------------------------------------------------------------- tokens


def token_map(path: Path | None) -> dict[str, str]:
    """{"*": token} from a file of one token, or {url: token} from lines 'URL TOKEN'; HANGWATCH_PEER_TOKEN
    is the token of every agent the file does not name."""
    tokens: dict[str, str] = {}
    env = os.environ.get("HANGWATCH_PEER_TOKEN")
    if env:
        tokens["*"] = env
    if path is None:
        return tokens
    lines = token_lines(path)  # the direct fleet's reader: a FIFO or /dev/zero given as the file cannot hang it
    if len(lines) == 1 and " " not in lines[0]:
        return {"*": lines[0]}
    for line in lines:
        url, _, token = line.partition(" ")
        if not token.strip() or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise FleetError(f"{path}: each line is 'URL TOKEN' (an agent's http(s) URL), or the file is one token")
        tokens[url.rstrip("/")] = token.strip()
    return tokens


# ---------------------------------------------------------------- polling


class PromFleet:
    """Reads the fleet from Prometheus every `interval` seconds; the same face as `Fleet` for the page."""

    def __init__(self, client: PrometheusClient, *, selector: str = "", tokens: Mapping[str, str] | None = None,
                 interval: float = 5.0, timeout: float = 3.0, max_details: int = 8) -> None:
        selector_matchers(selector)  # a bad selector fails here, before any query
        self.client, self.selector, self.interval, self.timeout = client, selector, interval, timeout
        self.tokens, self.max_details = dict(tokens or {}), max_details
        self.urls: list[str] = []
        self.fetched = 0  # agents asked for details, over the last refresh
        self._lock = threading.Lock()
        self._data: dict[str, Any] | None = None
        self._summary: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(8, max_details)), thread_name_prefix="hangwatch-promfleet")
        self._thread: threading.Thread | None = None

    @property
    def holds_tokens(self) -> bool:
        """Some agent needs a token: the details fetched from it are not for anyone who reaches the page."""
        return any(self.tokens.values())

    def _token(self, node: FleetNode) -> str | None:
        """The token for this agent: its own `URL TOKEN` line; else the shared token, but only where the
        URL the agent exports is the address Prometheus scrapes (a series cannot send it elsewhere)."""
        own = self.tokens.get(node.url.rstrip("/"))
        if own:
            return own
        return self.tokens.get("*") if urllib.parse.urlsplit(node.url).netloc == node.instance else None

    def poll_once(self) -> dict[str, Any]:
        nodes = read_nodes(self.client, self.selector)
        launches = group_launches(nodes)
        detailed = self._details(nodes, launches)
        launches.sort(key=_urgency)  # again: the agents' evidence may have named a launch's node apart
        summary = fleet_summary(nodes, launches)
        first = next((g for g in launches if g["apart"]), None)
        named = first["apart"] if first else []
        why = (f"launch {first['launch']}: {first['why']}" if first and first["multi_node"] else
               first["why"] if first else summary_text(summary)[0])
        # the page draws a calm launch as one row: its members stay out of the page's data (a tenth
        # of it at 1,000 nodes), and in the summary (`--json`, `self.summary()`)
        drawn = [g if g["apart"] or g["state"] in (*_BAD, "unreachable") else {**g, "members": []} for g in launches]
        data = page_data("fleet", f"hangwatch fleet · {len(nodes)} nodes", detailed, generated_at=time.time(),
                         fleet={"apart": named, "why": why, "source": "prometheus", **summary, "launches": drawn})
        with self._lock:
            self._data, self._summary = data, summary
            self.urls = [n.url for n in nodes]
        return data

    def summary(self) -> dict[str, Any] | None:
        """The last refresh's `--json` object (every launch with all its members)."""
        with self._lock:
            return self._summary

    def _details(self, nodes: Sequence[FleetNode], launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Snapshots of the nodes apart (most urgent launch first); where a launch's nodes are stalled
        alike, of its stalled nodes, and the snapshots' own evidence (ranks, phases) names the one apart."""
        by_instance = {n.instance: n for n in nodes}
        wanted: list[FleetNode] = []
        for g in launches:
            if len(wanted) >= self.max_details:
                break
            if g["apart"]:
                picks = [by_instance[i] for i in g["apart"]]
            elif g["state"] in _BAD:
                picks = [by_instance[m["instance"]] for m in g["members"] if m["state"] in _BAD]
            else:
                continue
            wanted.extend(picks[: self.max_details - len(wanted)])
        self.fetched = sum(1 for n in wanted if n.state != "unreachable")
        fetched = list(self._pool.map(self._fetch, wanted))
        for g in launches:  # stalled alike in Prometheus: let the agents' own evidence decide
            if g["apart"] or g["state"] not in _BAD:
                continue
            theirs = [f for f in fetched if f.get("launch") == g["launch"]]
            decided = apart(theirs) if len(theirs) > 1 else {"apart": []}
            if decided["apart"]:
                g["apart"], g["why"] = list(decided["apart"]), f"from the agents' own evidence: {decided['why']}"
        return fetched

    def _fetch(self, node: FleetNode) -> dict[str, Any]:
        if node.state == "unreachable":
            got: dict[str, Any] = {"url": node.url, "error": "Prometheus cannot scrape this agent (up == 0)",
                                   "verdict": None, "timeline": None, "stacks": None, "gpus": None, "history": None,
                                   "preflight": None}
        else:
            got = fetch_node(node.url, self._token(node), self.timeout)
        got.update(name=node.instance, launch=_launch_name(node))
        return got

    def data(self) -> dict[str, Any] | None:
        with self._lock:
            return self._data

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="hangwatch-promfleet", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
            except Exception as exc:  # Prometheus away, or an answer not understood: keep the last view, say so
                error = str(exc) if isinstance(exc, HangwatchError) else f"{type(exc).__name__}: {exc}"
                with self._lock:  # a new dict: a request may be serialising the old one
                    if self._data is not None and self._data.get("fleet"):
                        self._data = {**self._data, "fleet": {**self._data["fleet"], "error": error}}
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.client.timeout + self.timeout + 2)
        self._pool.shutdown(wait=False)
