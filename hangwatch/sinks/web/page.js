"use strict";
// hangwatch's page: draws a PageData object (see hangwatch/sinks/web/__init__.py) as plain HTML and SVG.
// No libraries, no network but the page's own origin. Every string from the data goes through esc().
(function () {
  const CFG = window.HW_CONFIG || { mode: "report", data: null };
  const TOKEN_KEY = "hangwatch-token";
  const POLL_MS = 1000;
  const PHASES = ["launch", "dist_init", "weight_load", "kv_cache", "attn_backend", "cuda_graph", "http_up", "warmup", "ready"];
  const PHASE_COLOR = {
    launch: "#90a4ae", dist_init: "#7e57c2", weight_load: "#1e88e5", kv_cache: "#00897b", attn_backend: "#f9a825",
    cuda_graph: "#ef6c00", http_up: "#6d4c41", warmup: "#5c6bc0", ready: "#43a047",
  };
  const PHASE_LABEL = {
    launch: "launch", dist_init: "distributed init", weight_load: "weight loading", kv_cache: "KV cache",
    attn_backend: "attention / JIT", cuda_graph: "CUDA graphs", http_up: "HTTP up", warmup: "warm-up", ready: "ready",
  };
  const STATE_WORDS = {
    stalled: "Stuck", crashed: "Crashed", progressing: "Starting, making progress", starting: "Starting",
    ready: "Ready: the server answers", stopped: "Stopped: a stop was asked for, nothing crashed",
  };
  const STATE_RANK = { crashed: 4, stalled: 3, starting: 2, progressing: 1, ready: 0, stopped: 0 };

  // ------------------------------------------------------------------ small helpers
  const $ = (id) => document.getElementById(id);
  function esc(v) {
    return String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g,
      (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }
  function fmtS(s) {
    if (num(s) === null) return "?";
    s = Math.max(0, s);
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  }
  function fmtClock(epoch) {
    if (num(epoch) === null) return "";
    const d = new Date(epoch * 1000);
    return d.toISOString().slice(11, 19) + " UTC";
  }
  function fmtDate(epoch) {
    if (num(epoch) === null) return "";
    return new Date(epoch * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }
  function rankKey(r) {
    const m = /^([A-Za-z_-]*?)(\d+)$/.exec(r.replace(/^.*\//, ""));
    return m ? [r.replace(/[^/]*$/, ""), m[1], Number(m[2])] : [r.replace(/[^/]*$/, ""), r === "main" ? "~" : r, -1];
  }
  function rankCmp(a, b) {
    const x = rankKey(a), y = rankKey(b);
    for (let i = 0; i < 3; i++) { if (x[i] < y[i]) return -1; if (x[i] > y[i]) return 1; }
    return 0;
  }
  function sortedRanks(ranks) { return Array.from(new Set(ranks)).sort(rankCmp); }
  // "TP0,TP1,TP2,TP5" -> "TP0-2, TP5"
  function compactRanks(ranks) {
    const groups = new Map(), out = [];
    for (const r of sortedRanks(ranks)) {
      const m = /^(.*?)(\d+)$/.exec(r);
      if (!m) { out.push(r); continue; }
      if (!groups.has(m[1])) groups.set(m[1], []);
      groups.get(m[1]).push(Number(m[2]));
    }
    for (const [prefix, nums] of groups) {
      let start = nums[0], prev = nums[0];
      const flush = () => out.push(start === prev ? prefix + start : prefix + start + "-" + prev);
      for (const n of nums.slice(1)) { if (n === prev + 1) { prev = n; continue; } flush(); start = prev = n; }
      flush();
    }
    return out.join(", ");
  }
  function swatch(color) { return "<svg class=\"swatch\" width=\"11\" height=\"11\"><rect width=\"11\" height=\"11\" rx=\"2\" fill=\"" + esc(color) + "\"/></svg>"; }
  function isBad(v) { return !!v && (v.state === "stalled" || v.state === "crashed"); }
  // a process without a rank is labelled by its pid
  function isPid(label) { return /^\d+$/.test(label); } // a process without a rank label
  function rankName(label) { return isPid(label) ? "pid " + label : label; }
  function phaseOrder(p) { const i = PHASES.indexOf(p); return i < 0 ? -1 : i; }
  function setHTML(id, html) {
    const node = $(id);
    if (node && node.__html !== html) { node.innerHTML = html; node.__html = html; }
  }

  // ------------------------------------------------------------------ model: a node's derived facts
  function mainThread(threads) {
    if (!Array.isArray(threads) || !threads.length) return null;
    return threads.find((t) => t && t.name === "MainThread") || threads[0];
  }
  function frameLabel(f) {
    if (!f) return "?";
    const name = f.qualname || f.function || "?";
    const file = f.file ? String(f.file).split("/").pop() : (f.library || "");
    return file ? name + " (" + file + (f.line ? ":" + f.line : "") + ")" : name;
  }
  // A native dump (py-spy --native, taken of a stalled rank) interleaves C frames with Python ones; the
  // tree keeps its Python frames, so it merges with the other ranks' Python-only stacks, plus the C
  // frames it is waiting in (innermost), which say what it waits on.
  function treeFrames(frames) {
    let lead = 0;
    while (lead < frames.length && frames[lead].origin === "native") lead++;
    if (lead === frames.length) return frames.slice();
    return frames.slice(0, lead).concat(frames.slice(lead).filter((f) => f.origin !== "native"));
  }
  // processes without a rank (the launcher, labelled by pid) are not ranks: left out when ranks exist
  function treeLabels(labels) {
    const ranks = labels.filter((l) => !isPid(l));
    return ranks.length ? ranks : labels;
  }
  // The merged stack tree (the same shape as the server's /stacks "tree").
  function buildTree(stacks, culprits, progress) {
    const root = { frame: "<all>", ranks: [], children: [] };
    for (const rank of sortedRanks(treeLabels(Object.keys(stacks || {})))) {
      const th = mainThread(stacks[rank]);
      if (!th || !Array.isArray(th.frames) || !th.frames.length) continue;
      root.ranks.push(rank);
      let node = root;
      for (const f of treeFrames(th.frames).reverse()) { // innermost first in the data; the tree runs root -> leaf
        const label = frameLabel(f);
        let child = node.children.find((c) => c.frame === label);
        if (!child) { child = { frame: label, ranks: [], children: [] }; node.children.push(child); }
        child.ranks.push(rank);
        node = child;
      }
    }
    root.outliers = treeOutliers(root, culprits, progress);
    return root;
  }
  // Who stands apart: the ranks the verdict names; else, where the ranks first part ways, the smallest
  // group; between groups of equal size, the one furthest behind in the startup (`progress`: rank -> score).
  function treeOutliers(root, culprits, progress) {
    const inTree = (culprits || []).filter((r) => root.ranks.includes(r));
    if (inTree.length) return inTree;
    let node = root;
    while (node.children.length === 1) node = node.children[0];
    if (node.children.length < 2) return [];
    const least = Math.min(...node.children.map((c) => c.ranks.length));
    let small = node.children.filter((c) => c.ranks.length === least);
    if (small.length > 1 && progress) {
      const score = (c) => Math.min(...c.ranks.map((r) => (r in progress ? progress[r] : Infinity)));
      const lowest = Math.min(...small.map(score));
      small = small.filter((c) => score(c) === lowest);
    }
    return small.length === 1 && least * 2 <= node.ranks.length ? small[0].ranks.slice() : [];
  }
  // rank -> how far its startup got: 2 per phase reached, +1 once that phase ended
  function rankProgress(timelineByRank, prefix) {
    const out = {};
    for (const [rank, spans] of Object.entries(timelineByRank || {})) {
      const last = spans[spans.length - 1];
      if (last) out[(prefix || "") + rank] = 2 * phaseOrder(last.phase) + (num(last.end) !== null ? 1 : 0);
    }
    return out;
  }
  function mergeTrees(trees) { // [{tree, prefix}] -> one tree with "prefix/rank" labels
    const root = { frame: "<all>", ranks: [], children: [], outliers: [] };
    const add = (into, node, prefix) => {
      for (const c of node.children || []) {
        let child = into.children.find((x) => x.frame === c.frame);
        if (!child) { child = { frame: c.frame, ranks: [], children: [] }; into.children.push(child); }
        child.ranks.push(...(c.ranks || []).map((r) => prefix + r));
        add(child, c, prefix);
      }
    };
    for (const { tree, prefix } of trees) {
      root.ranks.push(...(tree.ranks || []).map((r) => prefix + r));
      add(root, tree, prefix);
    }
    return root;
  }
  function pruneTree(node, keep) {
    const ranks = node.ranks.filter(keep);
    const children = node.children.map((c) => pruneTree(c, keep)).filter((c) => c.ranks.length);
    return { ...node, ranks, children };
  }
  function nodeStacks(node) { return (node.stacks && node.stacks.stacks) || {}; }
  function nodeTree(node) {
    const server = node.stacks && node.stacks.tree;
    const own = buildTree(nodeStacks(node), culpritsOf(node), rankProgress(timelineRanks(node)));
    // the server's merge, unless it holds fewer ranks than /stacks shows (it leaves out native dumps,
    // which are all a stalled rank may have left; the page folds those into Python frames)
    if (wellFormed(server, 0) && server.ranks.length >= own.ranks.length) {
      // the server's merge; who stands apart follows the page's order: the ranks the verdict names or
      // whose stacks decided it, else the server's outliers, and nobody while the server is not stuck
      const named = culpritsOf(node).filter((r) => (server.ranks || []).includes(r));
      const outliers = named.length ? named : isBad(node.verdict) ? server.outliers || [] : [];
      return { ...server, outliers };
    }
    if (!isBad(node.verdict) && !((node.verdict || {}).ranks || []).length) own.outliers = []; // groups differ while healthy
    return own;
  }
  // the shape docs/live.md gives the tree, all the way down (an older agent's redaction cut deep trees)
  function wellFormed(node, depth) {
    return !!node && typeof node === "object" && typeof node.frame === "string" && Array.isArray(node.ranks) &&
      Array.isArray(node.children) && depth < 400 && node.children.every((c) => wellFormed(c, depth + 1));
  }
  // the ranks the verdict names; else the processes whose stacks decided it, when they are not all of them
  function culpritsOf(node) {
    const v = node.verdict || {};
    if ((v.ranks || []).length) return v.ranks;
    if (!isBad(v)) return []; // slow or healthy: no process is "apart", whatever decided the verdict
    const labels = Object.keys(nodeStacks(node));
    const deciding = new Set();
    for (const e of v.evidence || []) {
      const m = /^stacks\/([^/]+?)(?:\.\d+)?\.(?:json|txt)\b/.exec(String(e.source || ""));
      if (m && labels.includes(m[1])) deciding.add(m[1]);
    }
    const inTree = treeLabels(labels).filter((l) => deciding.has(l));
    return inTree.length && inTree.length < treeLabels(labels).length ? inTree : [];
  }
  // "node/rank" for a rank a node's verdict names: the node that runs it (a verdict may name a peer's rank)
  // a rank runs on the node whose log it writes, else on the first whose stacks have it (on one host
  // an agent also samples the other nodes' ranks, as peers: stacks, no log)
  function ownerOf(data, rank) {
    return data.nodes.find((n) => rank in timelineRanks(n)) || data.nodes.find((n) => rank in nodeStacks(n));
  }
  function qualify(data, node, rank) {
    return (ownerOf(data, rank) || node).name + "/" + rank;
  }
  function ownedBy(data, node) { // keeps a node's own ranks, and processes without a rank
    return (label) => label === "main" || isPid(label) || (ownerOf(data, label) || node) === node;
  }
  function timelineRanks(node) { return (node.timeline && node.timeline.ranks) || {}; }
  function nodeNow(node) { // seconds since this node's watch began, when the data was taken
    const tl = node.timeline || {};
    if (num(tl.now) !== null) return tl.now;
    let t = 0;
    for (const spans of Object.values(timelineRanks(node))) for (const s of spans) t = Math.max(t, num(s.end) || 0, num(s.at) || 0);
    return t;
  }
  // A frame a person can read: a Python frame, or a native one with a symbol; a bare address
  // ("0x7f79a92a3f16" in libc.so.6) says nothing by itself.
  function isRawAddress(f) { return /^(0x[0-9a-f]+|\?+|)$/i.test(String(f.qualname || f.function || "")); }
  function stuckWhere(node, rank) { // for the headline: the innermost Python frame and its caller, raw addresses last
    const th = mainThread(nodeStacks(node)[rank]);
    if (!th || !th.frames || !th.frames.length) return null;
    const python = th.frames.filter((f) => f.origin !== "native" && !isRawAddress(f));
    const symbolised = th.frames.filter((f) => f.origin === "native" && !isRawAddress(f));
    const ordered = python.concat(symbolised, th.frames.filter(isRawAddress));
    return ordered.slice(0, 2).map(frameLabel);
  }
  // Text widths as the page draws them (the CSS's own fonts), so labels are placed where they fit.
  const measure = document.createElement("canvas").getContext("2d");
  function textWidth(text, px, mono) {
    if (!measure) return String(text).length * px * 0.62;
    const family = getComputedStyle(document.documentElement).getPropertyValue(mono ? "--mono" : "--sans").trim();
    measure.font = px + "px " + (family || (mono ? "monospace" : "sans-serif"));
    return measure.measureText(String(text)).width;
  }

  // ------------------------------------------------------------------ sections
  function renderBanner(data, focus) {
    const f = data.fleet || {};
    if (Array.isArray(f.launches) && !focus.verdict) { // from Prometheus, no agent's details (a calm fleet, or the agent apart does not answer)
      const worst = f.launches.length ? f.launches[0].state : "none";
      $("banner").className = "banner state-" + worst;
      $("banner").dataset.state = worst;
      $("state").textContent = f.launches.length ? worst : "no nodes";
      setHTML("headline", esc(((f.apart || []).length ? "node " + f.apart.join(", ") + " stands apart · " : "") + (f.why || "")));
      const focusErr = data.nodes.length && focus.error ? "its agent's details: " + focus.error : "";
      setHTML("subline", esc(focusErr));
      document.title = data.title || "hangwatch fleet";
      return;
    }
    const v = focus.verdict;
    const banner = $("banner");
    const state = v ? v.state : (focus.error ? "crashed" : "none");
    banner.className = "banner state-" + state;
    banner.dataset.state = v ? v.state : "";
    $("state").textContent = v ? v.state : (focus.error ? "unreachable" : "waiting");
    const fleetNote = data.nodes.length > 1 ? "node " + focus.name + ": " : "";
    let headline = v ? (v.title || STATE_WORDS[v.state] || v.state) : (focus.error ? "cannot read this agent" : "no verdict yet");
    setHTML("headline", esc(fleetNote + headline));
    const bits = [];
    if (v) {
      if (v.cause) bits.push("cause <b class=\"mono\" id=\"cause\">" + esc(v.cause) + "</b>");
      if (v.cause) bits.push("confidence <b>" + esc(v.confidence) + "</b> (" + esc(v.confidence_label) + ")");
      if (v.phase) bits.push("phase <b>" + esc(PHASE_LABEL[v.phase] || v.phase) + "</b>");
      if (num(v.since_s) !== null && (v.state === "stalled" || v.state === "crashed")) bits.push("no progress for <b>" + fmtS(v.since_s) + "</b>");
      if (v.ranks && v.ranks.length) bits.push("rank" + (v.ranks.length > 1 ? "s" : "") + " <b class=\"mono\">" + esc(compactRanks(v.ranks)) + "</b>");
      if (v.eta && num(v.eta.ready_in_s) !== null && v.state !== "ready") bits.push("ready in about <b>" + fmtS(v.eta.ready_in_s) + "</b>");
      else if (v.eta && num(v.eta.overdue_s) !== null && v.state !== "ready") bits.push("overdue by <b>" + fmtS(v.eta.overdue_s) + "</b>" + (num(v.eta.usual_s) !== null ? " (usually ready in " + fmtS(v.eta.usual_s) + ")" : ""));
    } else if (focus.error) bits.push(esc(focus.error));
    setHTML("subline", bits.join(" · "));
    document.title = (v ? v.state.toUpperCase() + (v.cause ? " " + v.cause : "") + " — " : "") + (data.title || "hangwatch");
  }

  function renderWhy(data, focus) {
    const v = focus.verdict;
    if (!v) { setHTML("why", "<p class=\"muted\">" + esc(focus.error || "Waiting for the first verdict…") + "</p>"); return; }
    const left = [], right = [];
    const culprits = v.ranks || [];
    if (v.state === "stalled" || v.state === "crashed") {
      const where = [];
      if (v.blocker && v.blocker.rank) {
        const b = v.blocker;
        where.push("<div class=\"blocker\" id=\"blocker\"><span class=\"culprit\">" + esc(b.rank) + "</span> " +
          (b.pid ? "(pid " + esc(b.pid) + ") " : "") + (b.frame ? "is in <code>" + esc(b.frame) + "</code> " : "") +
          (b.waits_on ? "waiting on <b>" + esc(b.waits_on) + "</b> " : "") + (b.state ? "[" + esc(b.state) + "] " : "") +
          (num(b.for_s) !== null ? "for " + fmtS(b.for_s) : "") + "</div>");
      } else {
        // no rank named: the processes whose stacks decided it, else every rank (a few ranks, all waiting)
        const deciding = culpritsOf(focus);
        const shown = deciding.length ? deciding : sortedRanks(Object.keys(nodeStacks(focus)).filter((l) => !isPid(l)));
        for (const r of shown.slice(0, 4)) {
          const frames = stuckWhere(focus, r), phase = (v.phases || {})[r];
          const bits = [];
          if (phase) bits.push("in <b>" + esc(PHASE_LABEL[phase] || phase) + "</b>");
          if (frames) bits.push("at <code>" + esc(frames[0]) + "</code>" + (frames[1] ? " ← <code>" + esc(frames[1]) + "</code>" : ""));
          where.push("<div class=\"blocker\"><span class=\"culprit\">" + esc(rankName(r)) + "</span> " + bits.join(", ") + "</div>");
        }
      }
      left.push(where.join(""));
    }
    const calm = { ready: "The server is up and answering.", progressing: "Something is moving (log, GPU memory, a busy rank): no stall.", starting: "Nothing looks wrong yet." };
    left.push("<div class=\"cause-line\">" + (v.cause ? "<span class=\"cause-id\">" + esc(v.cause) + "</span>" : "<span class=\"muted\">" + esc(calm[v.state] || "No cause named.") + "</span>") +
      (v.cause ? "<span class=\"conf\"><svg class=\"conf-bar\" width=\"70\" height=\"7\"><rect width=\"70\" height=\"7\" rx=\"3\" fill=\"#e5e7eb\"/><rect width=\"" + Math.round(70 * (num(v.confidence) || 0)) + "\" height=\"7\" rx=\"3\" fill=\"#1b1f24\"/></svg>" +
        esc(v.confidence) + " " + esc(v.confidence_label) + "</span>" : "") +
      (v.rule ? " <span class=\"muted mono\">rule " + esc(v.rule) + "</span>" : "") + "</div>");
    if (v.message) left.push("<div class=\"message\">" + esc(v.message) + "</div>");
    if (v.remedy) left.push("<div class=\"remedy\" id=\"remedy\"><b>What to do</b>" + esc(v.remedy) + "</div>");
    if (v.episode) {
      const e = v.episode;
      left.push("<p class=\"muted\">Episode <code>" + esc(e.id) + "</code> since " + esc(fmtClock(e.started_at)) +
        ((e.refined || []).length ? "; refined: " + e.refined.map((x) => esc(x.cause) + " (" + esc(x.confidence) + ") at " + esc(fmtClock(x.at))).join(", ") : "") + "</p>");
    }
    // candidates (issue 9) or the runners-up
    const cands = Array.isArray(v.candidates) && v.candidates.length ? v.candidates : null;
    right.push("<h3>" + (cands ? "Candidates" : "Runners-up") + "</h3>");
    if (cands) {
      right.push("<table class=\"cands\" id=\"candidates\"><tr><th>cause</th><th>conf.</th><th>for / against</th></tr>" + cands.map((c) =>
        "<tr><td><code>" + esc(c.cause) + "</code><br><span class=\"muted\">" + esc(c.rule || "") + "</span></td><td>" + esc(c.confidence) + "</td><td>" +
        (c.evidence_for || []).map((x) => "<div class=\"for\">+ " + esc(x) + "</div>").join("") +
        (c.evidence_against || []).map((x) => "<div class=\"against\">− " + esc(x) + "</div>").join("") +
        (c.check ? "<div class=\"muted\">check: <code>" + esc(c.check) + "</code></div>" : "") + "</td></tr>").join("") + "</table>");
    } else if ((v.runners_up || []).length) {
      right.push("<table class=\"cands\" id=\"candidates\"><tr><th>cause</th><th>rule</th><th>conf.</th></tr>" + v.runners_up.map((r) =>
        "<tr><td><code>" + esc(r.cause) + "</code></td><td class=\"muted\">" + esc(r.rule) + "</td><td>" + esc(r.confidence) + "</td></tr>").join("") + "</table>");
    } else right.push("<p class=\"muted\">none</p>");
    if ((v.missing || []).length) {
      right.push("<h3>Not collected</h3><ul class=\"missing\">" + v.missing.map((m) =>
        "<li><b>" + esc(m.source) + "</b>: " + esc(m.reason) + (m.hint ? " — <code>" + esc(m.hint) + "</code>" : "") + "</li>").join("") + "</ul>");
    }
    setHTML("why", "<div class=\"why-grid\"><div>" + left.join("") + "</div><div>" + right.join("") + "</div></div>");
  }

  function renderFleet(data) {
    const card = $("fleet");
    if (data.nodes.length < 2 && !data.fleet) { card.hidden = true; return; }
    card.hidden = false;
    const f = data.fleet || {};
    if (Array.isArray(f.launches)) { renderLaunches(data, f); return; }
    const apart = new Set(f.apart || []);
    const head = apart.size
      ? "<div class=\"apart-line\" id=\"apart\">Node <b>" + esc(Array.from(apart).join(", ")) + "</b> stands apart: " + esc(f.why || "") + "</div>"
      : "<div class=\"apart-line\" id=\"apart\">" + esc(f.why || "No node stands apart.") + "</div>";
    const cards = data.nodes.map((n) => {
      const v = n.verdict, st = v ? v.state : "unreachable";
      return "<div class=\"node" + (apart.has(n.name) ? " apart" : "") + "\" data-node=\"" + esc(n.name) + "\"><span class=\"st st-" + esc(st) + "\">" + esc(st) +
        "</span><b>" + esc(n.name) + "</b> <span class=\"muted mono\">" + esc(n.url || "") + "</span><br>" +
        (v ? esc(v.cause || STATE_WORDS[v.state] || "") + (v.ranks && v.ranks.length ? " · ranks " + esc(compactRanks(v.ranks)) : "") : "<span class=\"error\">" + esc(downLine(n)) + "</span>") + "</div>";
    });
    setHTML("fleet", "<h2>Nodes <small>" + data.nodes.length + " agents</small></h2>" + head + "<div class=\"nodes\">" + cards.join("") + "</div>");
  }

  // --- a fleet read from Prometheus (hangwatch fleet --prometheus): launches, most urgent first. The
  // launches with a node apart or a stuck node are drawn in full; the calm ones fold into one list,
  // a page of CALM_PAGE rows at a time, so a thousand nodes cost a few dozen rows of HTML.
  const CALM_PAGE = 50;
  let calmPage = 0, calmOpen = false;
  const URGENT = { crashed: 1, stalled: 1, unreachable: 1 };
  function memberLine(m, apartSet) {
    const st = m.state || "waiting";
    return "<tr class=\"member" + (apartSet.has(m.instance) ? " apart" : "") + "\" data-node=\"" + esc(m.instance) + "\"><td class=\"mono\">" +
      esc(m.instance) + "</td><td><span class=\"st st-" + esc(st) + "\">" + esc(st) + "</span></td><td>" + esc(m.node_rank || "") +
      "</td><td>" + esc(PHASE_LABEL[m.phase] || m.phase || "") + "</td><td class=\"mono\">" + esc(m.cause || "") + "</td><td>" +
      (num(m.since_s) !== null && URGENT[st] ? fmtS(m.since_s) : "") + "</td><td class=\"muted\">" + esc(m.blocker || "") + "</td></tr>";
  }
  function launchBlock(g) {
    const apartSet = new Set(g.apart || []);
    const members = g.members || [];
    const shown = members.slice(0, 12);
    const states = Object.entries(g.states || {}).map(([k, v]) => v + " " + k).join(", ");
    return "<div class=\"launch urgent\" data-launch=\"" + esc(g.launch) + "\"><div class=\"launch-head\"><span class=\"st st-" + esc(g.state) + "\">" + esc(g.state) +
      "</span> <b>" + (g.multi_node ? "launch " : "") + esc(g.launch) + "</b> <span class=\"muted\">" + esc(g.nodes) + " node" + (g.nodes === 1 ? "" : "s") + " · " + esc(states) + "</span></div>" +
      (apartSet.size ? "<div class=\"launch-apart\">node <b class=\"mono\">" + esc(Array.from(apartSet).join(", ")) + "</b> stands apart: " + esc(g.why) + "</div>"
        : "<div class=\"muted\">" + esc(g.why) + "</div>") +
      "<table class=\"members\"><tr><th>node</th><th>state</th><th>rank</th><th>phase</th><th>cause</th><th>no progress</th><th>blocker</th></tr>" +
      shown.map((m) => memberLine(m, apartSet)).join("") + "</table>" +
      (members.length > shown.length ? "<div class=\"muted\">and " + (members.length - shown.length) + " more nodes, none apart</div>" : "") + "</div>";
  }
  function renderLaunches(data, f) {
    const launches = f.launches;
    const urgent = launches.filter((g) => URGENT[g.state] || (g.apart || []).length);
    const calm = launches.filter((g) => !(URGENT[g.state] || (g.apart || []).length));
    const states = Object.entries(f.states || {}).sort((a, b) => (STATE_RANK[b[0]] ?? 3.5) - (STATE_RANK[a[0]] ?? 3.5)).map(([k, v]) => v + " " + k).join(", ");
    const apart = f.apart || [];
    const head = (apart.length ? "<div class=\"apart-line\" id=\"apart\">Node <b>" + esc(apart.join(", ")) + "</b> stands apart: " + esc(f.why || "") + "</div>"
      : "<div class=\"apart-line\" id=\"apart\">" + esc(f.why || "No node stands apart.") + "</div>") +
      (f.error ? "<div class=\"error\">" + esc(f.error) + "</div>" : "");
    const pages = Math.max(1, Math.ceil(calm.length / CALM_PAGE));
    calmPage = Math.min(calmPage, pages - 1);
    const rows = calm.slice(calmPage * CALM_PAGE, (calmPage + 1) * CALM_PAGE).map((g) => {
      return "<tr data-launch=\"" + esc(g.launch) + "\"><td class=\"mono\">" + esc(g.launch) + "</td><td><span class=\"st st-" + esc(g.state) + "\">" + esc(g.state) +
        "</span></td><td>" + esc(g.nodes) + "</td><td>" + esc(g.nodes === 1 ? (PHASE_LABEL[g.phase] || g.phase || "") : Object.entries(g.states || {}).map(([k, v]) => v + " " + k).join(", ")) + "</td></tr>";
    });
    const calmNodes = calm.reduce((n, g) => n + (g.nodes || 0), 0);
    const calmHtml = calm.length ? "<details id=\"calm\"" + (calmOpen ? " open" : "") + "><summary>" + calm.length + " launch" + (calm.length === 1 ? "" : "es") + " with no node apart (" + calmNodes + " nodes)</summary>" +
      "<table class=\"members\" id=\"calm-table\"><tr><th>launch</th><th>state</th><th>nodes</th><th>where</th></tr>" + rows.join("") + "</table>" +
      (pages > 1 ? "<div class=\"pager\"><button type=\"button\" data-page=\"-1\"" + (calmPage ? "" : " disabled") + ">previous</button> page " + (calmPage + 1) + " of " + pages +
        " <button type=\"button\" data-page=\"1\"" + (calmPage + 1 < pages ? "" : " disabled") + ">next</button></div>" : "") + "</details>" : "";
    setHTML("fleet", "<h2>Fleet <small id=\"fleet-count\">" + esc(f.nodes) + " nodes in " + launches.length + " launches · " + esc(states) + " · from Prometheus</small></h2>" + head +
      "<div id=\"launches\">" + urgent.map(launchBlock).join("") + "</div>" + calmHtml +
      (data.nodes.length ? "<p class=\"muted\">Details below (stacks, timeline, evidence) come from the agent" + (data.nodes.length > 1 ? "s" : "") + " of " + esc(data.nodes.map((n) => n.name).join(", ")) + ".</p>" : ""));
  }

  // --- the Gantt timeline
  function renderTimeline(data) {
    const multi = data.nodes.length > 1;
    const starts = data.nodes.map((n) => num(n.timeline && n.timeline.started_at));
    const known = starts.filter((x) => x !== null);
    const t0 = known.length ? Math.min(...known) : null;
    const rows = [];
    let now = 0, eta = null;
    const culpritSet = new Set();
    data.nodes.forEach((n, i) => {
      const off = t0 !== null && starts[i] !== null ? starts[i] - t0 : 0;
      const nnow = nodeNow(n) + off;
      now = Math.max(now, nnow);
      const v = n.verdict || {};
      if (v.eta && num(v.eta.ready_in_s) !== null && v.state !== "ready") eta = Math.max(eta || 0, nnow + v.eta.ready_in_s);
      const prefix = multi ? n.name + "/" : "";
      const tl = timelineRanks(n);
      const ranks = sortedRanks(Object.keys(tl).concat(Object.keys(v.phases || {})));
      for (const r of v.ranks || []) culpritSet.add(multi ? qualify(data, n, r) : r);
      for (const r of ranks) {
        rows.push({ node: n.name, rank: r, label: prefix + r, spans: (tl[r] || []).map((s) => ({ phase: s.phase, at: (num(s.at) || 0) + off, end: num(s.end) === null ? null : s.end + off })),
          nowAt: nnow, phase: (v.phases || {})[r], ready: v.state === "ready",
          // the hatch marks the ranks the verdict names, or every rank when it names none
          stalledFor: (v.state === "stalled" || v.state === "crashed") && (!(v.ranks || []).length || v.ranks.includes(r)) ? num(v.since_s) : null });
      }
    });
    if (!rows.length) { setHTML("timeline", "<p class=\"muted\">No startup phase seen in the log yet.</p>"); return; }
    const el = $("timeline");
    const W = Math.max(520, el.clientWidth || 900), rowH = 24, top = 22;
    const widest = Math.max(0, ...rows.map((r) => textWidth(r.label.replace(/(^|\/)main$/, "$1launcher") + " ◀", 12.5, true)));
    const labelW = Math.min(Math.max(multi ? 150 : 90, widest + 14), W * 0.4);
    const H = top + rows.length * rowH + 26;
    const tmax = Math.max(now, eta || 0, 1) * 1.04 + 1;
    const x = (t) => labelW + (Math.max(0, t) / tmax) * (W - labelW - 14);
    const out = ["<svg class=\"gantt\" id=\"gantt\" width=\"" + W + "\" height=\"" + H + "\" viewBox=\"0 0 " + W + " " + H + "\" role=\"img\" aria-label=\"startup timeline\">",
      "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#c62828\" opacity=\"0.25\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c62828\" stroke-width=\"3\"/></pattern></defs>"];
    const step = niceStep(tmax / 8);
    for (let t = 0; t <= tmax; t += step) {
      out.push("<line class=\"grid\" x1=\"" + x(t) + "\" x2=\"" + x(t) + "\" y1=\"" + (top - 4) + "\" y2=\"" + (H - 22) + "\"/>");
      out.push("<text class=\"ticklabel\" x=\"" + x(t) + "\" y=\"" + (H - 8) + "\" text-anchor=\"middle\">" + fmtS(t) + "</text>");
    }
    let lastNode = null;
    rows.forEach((row, i) => {
      const y = top + i * rowH, outlier = culpritSet.has(row.label);
      out.push("<g class=\"rank-row\" data-rank=\"" + esc(row.label) + "\"" + (outlier ? " data-outlier=\"1\"" : "") + ">");
      out.push("<rect class=\"rowbg" + (outlier ? " outlier" : "") + "\" x=\"0\" y=\"" + y + "\" width=\"" + W + "\" height=\"" + rowH + "\" fill=\"" + (i % 2 ? "#fafbfc" : "#fff") + "\"/>");
      if (multi && row.node !== lastNode) out.push("<line class=\"axis\" x1=\"0\" x2=\"" + W + "\" y1=\"" + y + "\" y2=\"" + y + "\"/>");
      lastNode = row.node;
      out.push("<text class=\"rowlabel" + (outlier ? " outlier" : "") + "\" x=\"6\" y=\"" + (y + 16) + "\">" + esc(row.label.replace(/(^|\/)main$/, "$1launcher")) + (outlier ? " ◀" : "") + "</text>");
      for (const s of row.spans) {
        const end = s.end === null ? row.nowAt : s.end;
        const x0 = x(s.at), x1 = Math.max(x(end), x0 + 2);
        const color = PHASE_COLOR[s.phase] || "#9e9e9e";
        out.push("<rect class=\"bar\" data-phase=\"" + esc(s.phase) + "\" x=\"" + x0.toFixed(1) + "\" y=\"" + (y + 4) + "\" width=\"" + (x1 - x0).toFixed(1) + "\" height=\"" + (rowH - 8) + "\" rx=\"2\" fill=\"" + color + "\"" +
          (s.end === null ? " opacity=\"0.85\"" : "") + "><title>" + esc(row.label + ": " + (PHASE_LABEL[s.phase] || s.phase) + " from " + fmtS(s.at) + (s.end === null ? ", still running" : " to " + fmtS(s.end) + " (" + fmtS(s.end - s.at) + ")")) + "</title></rect>");
        const name = PHASE_LABEL[s.phase] || s.phase;
        if (x1 - x0 >= textWidth(name, 11) + 8) out.push("<text class=\"barlabel" + (s.phase === "attn_backend" ? " dark" : "") + "\" x=\"" + (x0 + 4).toFixed(1) + "\" y=\"" + (y + 16) + "\">" + esc(name) + "</text>");
      }
      const lastSpan = row.spans[row.spans.length - 1];
      if (lastSpan && lastSpan.end !== null && !row.ready && row.nowAt - lastSpan.end > 0.5) {
        // the phase ended and no next one began: the rank waits between phases (a barrier, a peer)
        const xs = x(lastSpan.end), xe = x(row.nowAt);
        out.push("<rect class=\"between\" x=\"" + xs.toFixed(1) + "\" y=\"" + (y + 9) + "\" width=\"" + Math.max(1, xe - xs).toFixed(1) + "\" height=\"" + (rowH - 18) + "\" fill=\"#cfd4da\"><title>" +
          esc(row.label + ": " + (PHASE_LABEL[lastSpan.phase] || lastSpan.phase) + " ended " + fmtS(row.nowAt - lastSpan.end) + " ago; no next phase logged since") + "</title></rect>");
        const note = "after " + (PHASE_LABEL[lastSpan.phase] || lastSpan.phase) + ", nothing logged";
        if (xe - xs >= textWidth(note, 11) + 8) out.push("<text class=\"barlabel dark\" x=\"" + (xs + 4).toFixed(1) + "\" y=\"" + (y + 16) + "\">" + esc(note) + "</text>");
      }
      if (row.stalledFor !== null && row.stalledFor > 0) {
        const xs = x(row.nowAt - row.stalledFor), xe = x(row.nowAt);
        out.push("<rect class=\"stall\" x=\"" + xs.toFixed(1) + "\" y=\"" + (y + 2) + "\" width=\"" + Math.max(2, xe - xs).toFixed(1) + "\" height=\"" + (rowH - 4) + "\"><title>" + esc("no progress for " + fmtS(row.stalledFor)) + "</title></rect>");
      }
      out.push("</g>");
    });
    // "now" and "ETA" side by side when they would overlap: now ends at its line, ETA starts at its own
    const nowText = data.mode === "report" ? "captured" : "now";
    const close = eta !== null && Math.abs(x(eta) - x(now)) < (textWidth(nowText, 11) + textWidth("ETA", 11)) / 2 + 6;
    const anchorNow = close ? (x(eta) >= x(now) ? "end" : "start") : "middle", anchorEta = close ? (anchorNow === "end" ? "start" : "end") : "middle";
    out.push("<line class=\"now\" x1=\"" + x(now) + "\" x2=\"" + x(now) + "\" y1=\"" + (top - 8) + "\" y2=\"" + (H - 22) + "\"/><text class=\"ticklabel\" id=\"now-label\" x=\"" + x(now) + "\" y=\"" + (top - 10) + "\" text-anchor=\"" + anchorNow + "\">" + nowText + "</text>");
    if (eta !== null) out.push("<line class=\"eta\" x1=\"" + x(eta) + "\" x2=\"" + x(eta) + "\" y1=\"" + (top - 8) + "\" y2=\"" + (H - 22) + "\"/><text class=\"ticklabel\" id=\"eta-label\" x=\"" + x(eta) + "\" y=\"" + (top - 10) + "\" text-anchor=\"" + anchorEta + "\">ETA</text>");
    out.push("</svg>");
    const used = new Set();
    rows.forEach((r) => r.spans.forEach((s) => used.add(s.phase)));
    const legend = PHASES.filter((p) => used.has(p)).map((p) => "<span>" + swatch(PHASE_COLOR[p]) + esc(PHASE_LABEL[p]) + "</span>");
    legend.push("<span>" + swatch("#f3c1bd") + "no progress</span>");
    const zero = t0 !== null ? "<span>0 s = " + esc(fmtDate(t0)) + "</span>" : "";
    setHTML("timeline", out.join("") + "<div class=\"legend\">" + legend.join("") + zero + "</div>");
  }
  function niceStep(raw) {
    for (const s of [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200]) if (s >= raw) return s;
    return 3600 * Math.ceil(raw / 3600);
  }

  // --- the merged stack tree
  const openChains = new Set();
  function renderTree(data) {
    let tree;
    if (data.nodes.length > 1) {
      tree = mergeTrees(data.nodes.map((n) => ({ tree: pruneTree(nodeTree(n), ownedBy(data, n)), prefix: n.name + "/" })));
      // processes without a rank (launchers, by pid) leave the merged tree once any node has ranks
      const kept = new Set(treeLabels(tree.ranks.map((r) => r.replace(/^.*\//, ""))));
      tree = pruneTree(tree, (label) => kept.has(label.replace(/^.*\//, "")));
      const culprits = [];
      data.nodes.forEach((n) => ((n.verdict && n.verdict.ranks) || []).forEach((r) => culprits.push(qualify(data, n, r))));
      const fromNodes = [];
      data.nodes.forEach((n) => (nodeTree(n).outliers || []).filter(ownedBy(data, n)).forEach((r) => fromNodes.push(n.name + "/" + r)));
      const progress = {};
      data.nodes.forEach((n) => Object.assign(progress, rankProgress(timelineRanks(n), n.name + "/")));
      tree.outliers = data.nodes.some((n) => isBad(n.verdict)) || culprits.length
        ? treeOutliers(tree, culprits.length ? culprits : fromNodes, progress) : [];
    } else if (data.nodes.length === 1) tree = nodeTree(data.nodes[0]);
    if (!tree || !(tree.ranks || []).length) {
      setHTML("tree", "<p class=\"muted\">No stacks sampled yet: hangwatch samples every rank's stack when the log goes quiet (py-spy, without stopping the process).</p>");
      return;
    }
    const outliers = new Set(tree.outliers || []);
    const all = tree.ranks || [];
    const summary = outliers.size
      ? "<div class=\"tree-summary\" id=\"tree-outliers\">" + (outliers.size < all.length ? "Stands apart: " : "Named by the verdict: ") + sortedRanks(Array.from(outliers)).map((r) => "<span class=\"culprit\" data-rank=\"" + esc(r) + "\">" + esc(rankName(r)) + "</span>").join(" ") +
        " <span class=\"muted\">— " + all.length + " ranks sampled</span></div>"
      : "<div class=\"tree-summary muted\" id=\"tree-outliers\">" + all.length + " ranks sampled; no rank stands apart.</div>";
    const html = ["<div class=\"tree\" id=\"stacktree\"><ul>"];
    renderChildren(tree, "", outliers, html, all.length);
    html.push("</ul></div>");
    setHTML("tree", summary + html.join(""));
  }
  function rankBadges(ranks, outliers) {
    const odd = sortedRanks(ranks.filter((r) => outliers.has(r))), rest = ranks.filter((r) => !outliers.has(r));
    return "<span class=\"ranks\">" + odd.map((r) => "<span class=\"r outlier\">" + esc(rankName(r)) + "</span>").join("") +
      (rest.length ? "<span class=\"r\">" + esc(compactRanks(rest.map(rankName))) + "</span>" : "") + "</span>";
  }
  function renderChildren(node, path, outliers, html, total) {
    node.children.forEach((child, i) => {
      // follow a chain of frames that every rank of this branch shares
      const chain = [child];
      let last = child;
      while (last.children.length === 1 && last.children[0].ranks.length === last.ranks.length) { last = last.children[0]; chain.push(last); }
      const key = path + "/" + i;
      const isOutlier = child.ranks.length < total && child.ranks.every((r) => outliers.has(r));
      const cls = "frame" + (isOutlier ? " outlier" : "") + (node.children.length > 1 ? " split" : "");
      const dataRanks = " data-ranks=\"" + esc(child.ranks.join(",")) + "\"";
      let shown = chain;
      let folded = 0;
      if (chain.length > 6 && !openChains.has(key)) { shown = chain.slice(0, 2).concat(chain.slice(-3)); folded = chain.length - 5; }
      html.push("<li" + dataRanks + (isOutlier ? " class=\"outlier-branch\"" : "") + "><span class=\"" + cls + "\">" + esc(shown[0].frame) + "</span>" + rankBadges(child.ranks, outliers));
      for (let k = 1; k < shown.length; k++) {
        if (folded && k === 2) html.push("<br><button class=\"fold\" data-key=\"" + esc(key) + "\">⋯ " + folded + " more frames</button>");
        html.push("<br><span class=\"" + cls + "\">" + esc(shown[k].frame) + "</span>");
      }
      if (last.children.length) {
        html.push("<ul>");
        renderChildren(last, key, outliers, html, total);
        html.push("</ul>");
      } else html.push(" <span class=\"muted\">← innermost</span>");
      html.push("</li>");
    });
  }

  function renderEvidence(data) {
    // one list: an item two nodes both report (each sampled the other's ranks as peers) is shown once
    const seen = new Map();
    for (const n of data.nodes) {
      for (const e of (n.verdict && n.verdict.evidence) || []) {
        const key = e.text + "\u0000" + e.source;
        if (seen.has(key)) seen.get(key).nodes.push(n.name);
        else seen.set(key, { e: e, nodes: [n.name] });
      }
    }
    // a node that does not answer is evidence for the ones that do (a rendezvous waiting for it, say)
    for (const n of data.nodes.length > 1 ? data.nodes : []) {
      if (n.verdict) continue;
      const e = { text: "node " + n.name + " " + downLine(n), source: "fleet: " + (n.url || n.name), role: null };
      seen.set(e.text + "\u0000" + e.source, { e: e, nodes: [] });
    }
    const items = Array.from(seen.values()).map(({ e, nodes }) => {
      const role = e.role === "root" || e.role === "consequence" ? "<span class=\"role " + e.role + "\">" + (e.role === "root" ? "root" : "consequence") + "</span>" : "";
      return "<li>" + role + esc(e.text) + "<span class=\"src\">" + (nodes.length && data.nodes.length > 1 ? esc(nodes.join(", ")) + ": " : "") + esc(e.source) + "</span></li>";
    });
    setHTML("evidence", items.length ? "<ul class=\"evidence\" id=\"evidence-list\">" + items.join("") + "</ul>" : "<p class=\"muted\">No deciding evidence: nothing looks wrong.</p>");
  }

  function renderGpus(data) {
    const cards = [];
    let missing = null;
    for (const n of data.nodes) {
      const samples = (n.gpus && n.gpus.samples) || [];
      const per = new Map();
      for (const s of samples) for (const g of s.gpus || []) {
        if (!per.has(g.index)) per.set(g.index, { name: g.name, pts: [] });
        per.get(g.index).pts.push({ t: s.t, mem: num(g.memory_used_mib), total: num(g.memory_total_mib), util: num(g.utilization_pct) });
      }
      for (const [index, g] of per) cards.push(gpuCard((data.nodes.length > 1 ? n.name + " " : "") + "GPU " + index, g));
      if (!per.size && n.verdict) missing = (n.verdict.missing || []).find((m) => /nvml|gpu/i.test(m.source + " " + m.reason));
    }
    if (!cards.length) {
      setHTML("gpus", "<p class=\"muted\">No GPU samples" + (missing ? ": " + esc(missing.reason) : " (no NVML on this machine)") + ".</p>");
      return;
    }
    setHTML("gpus", "<div class=\"legend\"><span>" + swatch("#bbdefb") + "memory used</span><span>" + swatch("#ef6c00") + "utilisation</span></div><div class=\"gpu-grid\">" + cards.join("") + "</div>");
  }
  function gpuCard(title, g) {
    const pts = g.pts.slice(-600), W = 240, H = 46;
    const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1);
    const total = Math.max(...pts.map((p) => p.total || 0), ...pts.map((p) => p.mem || 0), 1);
    const px = (t) => ((t - t0) / (t1 - t0)) * W;
    const memPts = pts.filter((p) => p.mem !== null).map((p) => px(p.t).toFixed(1) + "," + (H - (p.mem / total) * (H - 2)).toFixed(1));
    const utilPts = pts.filter((p) => p.util !== null).map((p) => px(p.t).toFixed(1) + "," + (H - (p.util / 100) * (H - 2)).toFixed(1));
    const lastP = pts[pts.length - 1];
    const svg = "<svg class=\"spark\" viewBox=\"0 0 " + W + " " + H + "\" preserveAspectRatio=\"none\">" +
      (memPts.length ? "<polygon class=\"mem\" points=\"" + px(pts.find((p) => p.mem !== null).t).toFixed(1) + "," + H + " " + memPts.join(" ") + " " + memPts[memPts.length - 1].split(",")[0] + "," + H + "\"/>" : "") +
      (utilPts.length ? "<polyline class=\"util\" points=\"" + utilPts.join(" ") + "\"/>" : "") + "</svg>";
    const gib = (m) => (m === null ? "?" : (m / 1024).toFixed(1));
    return "<div class=\"gpu\"><div class=\"gpu-title\">" + esc(title) + (g.name ? " <span class=\"muted\">" + esc(g.name) + "</span>" : "") + "</div>" + svg +
      "<div class=\"spark-label\"><span>" + gib(lastP.mem) + " / " + gib(lastP.total) + " GiB" + memChange(pts) + "</span><span>" + (lastP.util === null ? "?" : Math.round(lastP.util)) + " % busy</span></div></div>";
  }

  // "+4.1 GiB in 2 s": a rise too small to see on the card's scale is still the news (a pool being built)
  function memChange(pts) {
    const mem = pts.filter((p) => p.mem !== null);
    if (mem.length < 2) return "";
    const delta = mem[mem.length - 1].mem - mem[0].mem;
    if (Math.abs(delta) < 256) return "";
    return " (" + (delta > 0 ? "+" : "−") + (Math.abs(delta) / 1024).toFixed(1) + " in " + fmtS(mem[mem.length - 1].t - mem[0].t) + ")";
  }

  function renderPreflight(data) {
    const findings = [];
    for (const n of data.nodes) for (const f of (n.preflight && n.preflight.findings) || []) findings.push([n, f]);
    const any = data.nodes.some((n) => n.preflight);
    $("preflight-card").hidden = !any;
    if (!any) return;
    setHTML("preflight", findings.length ? "<ul class=\"evidence\">" + findings.map(([n, f]) => "<li><span class=\"role " + (f.severity === "error" ? "root" : "consequence") + "\">" + esc(f.severity) + "</span><b>" + esc(f.title) + "</b> <code>" + esc(f.cause) + "</code>" +
      (data.nodes.length > 1 ? " <span class=\"muted\">" + esc(n.name) + "</span>" : "") + "<span class=\"src\">" + esc(f.evidence) + "</span>" + (f.remedy ? "<div>" + esc(f.remedy) + "</div>" : "") + "</li>").join("") + "</ul>"
      : "<p class=\"muted\">All preflight checks passed.</p>");
  }

  function renderHistory(data) {
    const trs = [], alerts = [];
    for (const n of data.nodes) {
      const h = n.history || {};
      for (const t of h.transitions || []) trs.push([n, t]);
      for (const a of h.alerts || []) alerts.push([n, a]);
    }
    const multi = data.nodes.length > 1;
    trs.sort((a, b) => b[1].at - a[1].at);
    alerts.sort((a, b) => b[1].at - a[1].at);
    const out = [];
    out.push("<h3>Verdict changes</h3>");
    out.push(trs.length ? "<table class=\"hist\" id=\"transitions\"><tr><th>when</th>" + (multi ? "<th>node</th>" : "") + "<th>state</th><th>cause</th><th>phase</th><th>episode</th></tr>" + trs.slice(0, 30).map(([n, t]) =>
      "<tr><td>" + esc(fmtClock(t.at)) + "</td>" + (multi ? "<td>" + esc(n.name) + "</td>" : "") + "<td class=\"st st-" + esc(t.state) + "\">" + esc(t.state) + "</td><td><code>" + esc(t.cause || "") + "</code></td><td>" + esc(t.phase || "") + "</td><td class=\"mono\">" + esc(t.episode_id || "") + "</td></tr>").join("") + "</table>"
      : "<p class=\"muted\">" + (data.nodes.some((n) => n.history && n.history.enabled === false) ? "No history kept (run with --serve or --history)." : "No change yet.") + "</p>");
    out.push("<h3>Alert deliveries</h3>");
    out.push(alerts.length ? "<table class=\"hist\" id=\"alerts\"><tr><th>when</th>" + (multi ? "<th>node</th>" : "") + "<th>sink</th><th>event</th><th>status</th><th>attempts</th><th>detail</th></tr>" + alerts.slice(0, 30).map(([n, a]) =>
      "<tr><td>" + esc(fmtClock(a.at)) + "</td>" + (multi ? "<td>" + esc(n.name) + "</td>" : "") + "<td>" + esc(a.sink) + "</td><td>" + esc(a.kind) + "</td><td class=\"st st-" + esc(a.status) + "\">" + esc(a.status) + "</td><td>" + esc(a.attempts) + "</td><td class=\"muted\">" + esc(a.detail || "") + "</td></tr>").join("") + "</table>"
      : "<p class=\"muted\">No alert sent (configure --slack-webhook or --webhook).</p>");
    setHTML("history", out.join(""));
  }

  function renderFooter(data) {
    const names = data.nodes.map((n) => (n.stacks && n.stacks.server) || (n.timeline && n.timeline.server) || n.name).filter(Boolean);
    const when = data.mode === "report" ? "report written " + fmtDate(data.generated_at) : "live";
    setHTML("footer", "hangwatch · " + esc(names.join(" · ")) + " · " + esc(when));
  }

  // the node whose verdict heads the page: the one standing apart, else the most urgent verdict; a node
  // that does not answer has no diagnosis to lead with (its card and the evidence say it is down)
  function focusNode(data) {
    const apart = (data.fleet && data.fleet.apart) || [];
    const byName = data.nodes.find((n) => apart.includes(n.name) && n.verdict);
    if (byName) return byName;
    const urgency = (n) => (n.verdict ? STATE_RANK[n.verdict.state] ?? 0 : -1);
    return data.nodes.slice().sort((a, b) => urgency(b) - urgency(a))[0] || { name: "?", verdict: null };
  }
  function downLine(n) { // "node 1 unreachable since 20:41 — is it started?"
    return "unreachable" + (num(n.down_since) !== null ? " since " + fmtClock(n.down_since) : "") + " — is it started? (" + (n.error || "no data") + ")";
  }

  function render(data) {
    if (!data || !Array.isArray(data.nodes)) return;
    const focus = focusNode(data);
    const sections = [renderBanner.bind(null, data, focus), renderFleet, renderWhy.bind(null, data, focus), renderTimeline, renderTree, renderEvidence, renderGpus, renderPreflight, renderHistory, renderFooter];
    for (const fn of sections) {
      try { fn(data); } catch (err) { console.warn("hangwatch page: a section failed to draw:", err); }
    }
    window.HW_LAST = data;
  }

  // ------------------------------------------------------------------ data: embedded, or polled
  let lastOk = null, failing = null, pollTimer = null;
  function token() { try { return sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; } }
  function askToken(message) {
    $("token-form").hidden = false;
    $("main").hidden = true;
    $("token-error").textContent = message || "";
    $("state").textContent = "locked";
    $("token-input").focus();
  }
  async function poll() {
    clearTimeout(pollTimer);
    if (CFG.auth && !token()) { askToken(""); return; }
    const headers = { Accept: "application/json" };
    if (token()) headers.Authorization = "Bearer " + token();
    try {
      const r = await fetch("snapshot", { headers, cache: "no-store", credentials: "omit", redirect: "error" });
      if (r.status === 401) { try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ } askToken("That token was refused."); return; }
      if (!r.ok) throw new Error("HTTP " + r.status);
      const data = await r.json();
      $("token-form").hidden = true;
      $("main").hidden = false;
      lastOk = Date.now(); failing = null;
      render(data);
    } catch (err) {
      failing = String(err && err.message ? err.message : err);
    }
    showStatus();
    pollTimer = setTimeout(poll, POLL_MS);
  }
  function showStatus() {
    const st = $("status");
    if (failing) {
      st.className = "status stale";
      st.textContent = "agent not answering" + (lastOk ? " for " + fmtS((Date.now() - lastOk) / 1000) : "") + " — retrying";
    } else {
      st.className = "status";
      st.textContent = (CFG.mode === "fleet" ? "fleet · " : "live · ") + "updated " + fmtClock(Date.now() / 1000);
    }
  }
  function start() {
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const value = $("token-input").value.trim();
      $("token-input").value = "";
      if (!value) return;
      try { sessionStorage.setItem(TOKEN_KEY, value); } catch (e) { /* private mode: kept nowhere, asked again */ }
      poll();
    });
    $("fleet").addEventListener("click", (ev) => {
      const b = ev.target.closest("button[data-page]");
      if (!b) return;
      calmPage = Math.max(0, calmPage + Number(b.dataset.page));
      if (window.HW_LAST) renderFleet(window.HW_LAST);
    });
    $("fleet").addEventListener("toggle", (ev) => { if (ev.target.id === "calm") calmOpen = ev.target.open; }, true);
    $("tree").addEventListener("click", (ev) => {
      const b = ev.target.closest("button.fold");
      if (!b) return;
      openChains.add(b.dataset.key);
      if (window.HW_LAST) renderTree(window.HW_LAST);
    });
    window.addEventListener("resize", () => { if (window.HW_LAST) renderTimeline(window.HW_LAST); });
    if (CFG.data) {
      render(CFG.data);
      $("status").textContent = "report · " + fmtDate(CFG.data.generated_at);
    } else poll();
  }
  start();
})();
