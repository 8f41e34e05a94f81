// kraftlab ui: draws a view state (docs/ui.md "The view state") and, live, sends the buttons'
// actions; in a replay, steps through recorded frames. Plain JavaScript, no dependencies.
"use strict";

const $ = (selector, root = document) => root.querySelector(selector);
const EPOCH_COLORS = ["#4f86c6", "#2e9e6b", "#d2872c", "#8c5bc4", "#c2467a", "#3aa6a6",
                      "#7a8a2e", "#b35c3a"];
const KINDS = ["fault", "election", "broker", "isr", "hw", "truncation", "anomaly", "produce",
               "error"];
const MAX_LIVE_EVENTS = 300;
const TOKEN_KEY = "kraftlab-admin-token";

const view = {
  mode: null, state: null, events: [], frames: [], anomalies: [], frame: 0, timer: null,
  filters: new Set(KINDS), timelineKey: "",
};

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => (
    { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function epochColor(epoch) {
  return EPOCH_COLORS[((epoch % EPOCH_COLORS.length) + EPOCH_COLORS.length) % EPOCH_COLORS.length];
}

function setStatus(text, kind) {
  const el = $("#status");
  el.textContent = text;
  el.className = `status ${kind || ""}`;
}

// --- nodes ----------------------------------------------------------------------------------

function nodeCard(container, kind, id) {
  let card = container.querySelector(`[data-node="${id}"]`);
  if (card) return card;
  card = document.createElement("div");
  card.className = "card node";
  card.dataset.node = id;
  card.dataset.kind = kind;
  let buttons = "";
  if (view.mode === "live") {
    buttons = `<div class="buttons">
      <button class="danger" data-action="kill" data-node="${id}" title="SIGKILL (kill -9)">kill</button>
      <button data-action="pause" data-node="${id}" title="SIGSTOP">pause</button>
      <button data-action="resume" data-node="${id}" title="SIGCONT">resume</button>
      <button data-action="restart" data-node="${id}" title="SIGTERM, then start">restart</button>
      <button data-action="start" data-node="${id}">start</button>
      <button data-action="isolate" data-node="${id}" title="cut its links to every other node">isolate</button>
    </div>`;
  }
  card.innerHTML = `<div class="card-head"><b>${kind} ${id}</b><span class="role"></span></div>
    <div class="facts"></div>${buttons}`;
  const after = [...container.children].find((c) => Number(c.dataset.node) > id);
  container.insertBefore(card, after || null);
  return card;
}

function updateButtons(card, up, paused) {
  const set = (action, enabled, shown = true) => {
    const b = card.querySelector(`[data-action="${action}"]`);
    if (!b) return;
    b.disabled = !enabled;
    b.hidden = !shown;
  };
  set("kill", up);
  set("pause", up && !paused);
  set("resume", up && paused);
  set("restart", up, up);
  set("start", !up, !up);
  set("isolate", up && !paused);
}

function renderControllers(controllers) {
  const box = $("#controllers");
  for (const c of controllers) {
    const card = nodeCard(box, "controller", c.id);
    const state = !c.up ? "down" : c.paused ? "paused" : c.role === "leader" ? "leader" : "follower";
    card.dataset.state = state;
    card.dataset.role = c.role;
    $(".role", card).textContent = c.paused ? `paused (${c.role})` : c.role;
    const facts = [];
    if (c.up) {
      if (c.epoch !== null && c.epoch !== undefined) facts.push(`epoch ${c.epoch}`);
      if (c.high_watermark !== null && c.high_watermark !== undefined) facts.push(`HW ${c.high_watermark}`);
      if (c.log_end_offset !== null && c.log_end_offset !== undefined) facts.push(`LEO ${c.log_end_offset}`);
      if (c.voted_id !== null && c.voted_id !== undefined) facts.push(`voted for ${c.voted_id}`);
      if (c.leader_id !== null && c.leader_id !== undefined && c.role !== "leader") facts.push(`leader ${c.leader_id}`);
    }
    $(".facts", card).textContent = facts.join(" · ") || (c.up ? "" : "process not running");
    updateButtons(card, c.up, c.paused);
  }
}

function renderBrokers(brokers, partitions) {
  const box = $("#brokers");
  for (const b of brokers) {
    const card = nodeCard(box, "broker", b.id);
    const state = !b.up ? "down" : b.paused ? "paused" : b.fenced ? "fenced" : "up";
    card.dataset.state = state;
    card.dataset.fenced = String(Boolean(b.fenced));
    const role = !b.up ? "down" : b.paused ? "paused" : !b.registered ? "not registered"
      : b.shutdown ? "shutting down" : b.fenced ? "fenced" : "unfenced";
    $(".role", card).textContent = role;
    const facts = [];
    if (b.epoch !== null && b.epoch !== undefined) facts.push(`broker epoch ${b.epoch}`);
    const leads = partitions.filter((p) => p.leader === b.id).map((p) => `${p.topic}-${p.partition}`);
    if (leads.length) facts.push(`leads ${leads.slice(0, 4).join(", ")}${leads.length > 4 ? "…" : ""}`);
    $(".facts", card).textContent = facts.join(" · ");
    updateButtons(card, b.up, b.paused);
  }
}

// --- partitions: the logs as bars, LEO and HW marked ----------------------------------------

function renderPartitions(partitions, anomalies) {
  const box = $("#partitions");
  if (!partitions.length) {
    box.innerHTML = `<p class="empty">${view.mode === "live"
      ? "no topic yet: kraftlab topic create NAME --partitions 1 --replication-factor 3"
      : "no partition yet"}</p>`;
    return;
  }
  $(".empty", box)?.remove();
  const epochs = new Set();
  const names = new Set();
  for (const part of partitions) {
    const name = `${part.topic}-${part.partition}`;
    names.add(name);
    let el = box.querySelector(`[data-partition="${CSS.escape(name)}"]`);
    if (!el) {
      el = document.createElement("div");
      el.className = "partition";
      el.dataset.partition = name;
      el.innerHTML = `<div class="partition-head"></div>
        <svg class="logs" xmlns="http://www.w3.org/2000/svg"></svg>`;
      box.appendChild(el);
    }
    el.dataset.isr = part.isr.join(",");
    el.dataset.leader = part.leader === null ? "" : String(part.leader);
    el.dataset.leaderEpoch = String(part.leader_epoch);
    el.dataset.anomaly = anomalies.map((a) => a.kind).join(",");
    const full = part.isr.length === part.replicas.length;
    $(".partition-head", el).innerHTML = `${esc(name)}
      <span>mode ${esc(part.mode)}</span>
      <span>leader ${part.leader === null ? "none" : part.leader}, epoch ${part.leader_epoch}</span>
      <span class="isr">ISR [${part.isr.join(", ")}]${full ? "" : ` of [${part.replicas.join(", ")}]`}</span>
      ${part.elr && part.elr.length ? `<span>ELR [${part.elr.join(", ")}]</span>` : ""}`;
    const svg = $("svg", el);
    const width = Math.max(640, el.clientWidth || 1000);
    const drawn = drawLogs(part, width, anomalies, epochs);
    svg.setAttribute("viewBox", `0 0 ${width} ${drawn.height}`);
    svg.setAttribute("height", drawn.height);
    svg.innerHTML = drawn.svg;
  }
  for (const el of [...box.querySelectorAll("[data-partition]")]) {
    if (!names.has(el.dataset.partition)) el.remove();
  }
  $("#epoch-legend").innerHTML = epochs.size
    ? "leader epoch of each record: " + [...epochs].sort((a, b) => a - b).map(
      (e) => `<span class="epoch-chip" style="background:${epochColor(e)}">${e}</span>`).join("")
    : "";
}

const ROW = { labelW: 150, infoW: 200, top: 30, height: 58, barH: 20 };

// Which offsets the picture shows and where each one is drawn. A recording carries the records
// of its last 24 offsets; live, the last 40 offsets are drawn. Up to 80 offsets are boxes.
function geometry(part, width) {
  const logs = part.logs;
  const barX = ROW.labelW, barW = Math.max(200, width - ROW.labelW - ROW.infoW);
  const maxLeo = Math.max(0, ...logs.map((l) => l.leo));
  const hi = Math.max(maxLeo, part.committed_end || 0, 1);
  const recorded = logs.some((l) => Array.isArray(l.entries));
  const minStart = Math.min(...logs.map((l) => l.log_start));
  const firstEntry = Math.min(...logs.flatMap((l) => (l.entries || []).map((e) => e[0])), Infinity);
  let lo = recorded ? Math.max(minStart, Math.min(firstEntry, maxLeo - 24)) : Math.max(minStart, hi - 40);
  lo = Math.max(0, Math.min(lo, hi - 1));
  const span = hi - lo + 1;  // one more cell: room for the LEO mark of a full log
  const cellW = Math.min(barW / span, 56);  // a short log stays a row of boxes, not a slab
  return { lo, hi, minStart, span, cellW, barX, barW, asCells: span <= 80,
           x: (offset) => barX + (offset - lo) * cellW };
}

function drawLogs(part, width, anomalies, epochsSeen) {
  const g = geometry(part, width);
  const marks = {
    diverged: new Set(anomalies.filter((a) => a.kind === "divergence").flatMap((a) => a.offsets)),
    lost: anomalies.filter((a) => a.kind === "loss").flatMap((a) => a.offsets),
    leader: part.logs.find((l) => l.id === part.leader && l.role === "leader"),
  };
  const out = [];
  part.logs.forEach((log, i) => drawRow(out, g, part, log, ROW.top + i * ROW.height, width, marks, epochsSeen));
  const bottom = ROW.top + part.logs.length * ROW.height;
  drawPartitionMarks(out, g, part, marks.leader, bottom);
  return { svg: out.join(""), height: bottom + 16 };
}

function drawRow(out, g, part, log, y0, width, marks, epochsSeen) {
  const y = y0 + 14, { x, lo, hi } = g;
  const inIsr = part.isr.includes(log.id);
  const inElr = (part.elr || []).includes(log.id);
  const classes = ["replica", log.role === "down" ? "down" : "", inIsr ? "in-isr" : "out-of-isr"];
  out.push(`<g class="${classes.join(" ")}" data-replica="${log.id}" data-role="${esc(log.role)}"
    data-leo="${log.leo}" data-hw="${log.hw}" data-in-isr="${inIsr}">`);
  out.push(`<rect class="row-bg" x="0" y="${y0}" width="${width}" height="${ROW.height - 4}"></rect>`);
  const badge = inIsr ? ["ISR", "badge-isr"] : inElr ? ["ELR", "badge-elr"] : ["out", "badge-out"];
  out.push(`<text x="4" y="${y + 8}"><tspan font-weight="600">broker ${log.id}</tspan></text>`);
  out.push(`<text x="4" y="${y + 23}" class="muted">${esc(log.role)}${log.id === part.leader ? " ★" : ""}</text>`);
  out.push(`<rect x="${ROW.labelW - 46}" y="${y + 1}" width="34" height="16" rx="8" class="${badge[1]}"></rect>`);
  out.push(`<text x="${ROW.labelW - 29}" y="${y + 13}" text-anchor="middle" style="fill:#fff;font-size:10px">${badge[0]}</text>`);
  out.push(`<rect class="bar-bg" x="${x(lo)}" y="${y}" width="${x(hi + 1) - x(lo)}" height="${ROW.barH}"></rect>`);
  drawRecords(out, g, log, y, marks.diverged, epochsSeen);
  if (log === marks.leader) drawLost(out, g, log, y, marks.lost);
  if (log.leo < lo) {
    out.push(`<text x="${x(lo) + 4}" y="${y + 14}" class="muted">&#x25C0; log ends at ${log.leo}</text>`);
  }
  if (log.hw >= lo) {
    out.push(`<line class="hw-mark" x1="${x(log.hw)}" y1="${y - 3}" x2="${x(log.hw)}" y2="${y + ROW.barH + 3}"></line>`);
    out.push(`<text x="${x(log.hw)}" y="${y + ROW.barH + 14}" text-anchor="middle">HW ${log.hw}</text>`);
  }
  if (log.leo >= lo) {
    const lx = x(log.leo);
    out.push(`<path class="leo-mark" d="M${lx - 5} ${y - 10} L${lx + 5} ${y - 10} L${lx} ${y - 2} Z"></path>`);
    out.push(`<text x="${lx + 7}" y="${y - 3}">LEO ${log.leo}</text>`);
  }
  out.push(`<text x="${Math.min(g.barX + g.barW, x(hi + 1)) + 16}" y="${y + 14}">${esc(replicaInfo(log, part))}</text>`);
  out.push("</g>");
}

// One box per record (colored by the leader epoch that wrote it, when known), solid below this
// replica's HW and pale above it; a long window is two bars instead.
function drawRecords(out, g, log, y, diverged, epochsSeen) {
  const { x, cellW } = g, barH = ROW.barH;
  const from = Math.max(g.lo, log.log_start);
  if (!g.asCells) {
    const hw = Math.max(from, Math.min(log.hw, log.leo));
    out.push(`<rect class="cell committed" x="${x(from)}" y="${y + 1}" width="${Math.max(0, x(hw) - x(from))}" height="${barH - 2}"></rect>`);
    out.push(`<rect class="cell pending" x="${x(hw)}" y="${y + 1}" width="${Math.max(0, x(log.leo) - x(hw))}" height="${barH - 2}"></rect>`);
    return;
  }
  const entries = new Map((log.entries || []).map((e) => [e[0], e]));
  for (let o = from; o < log.leo; o++) {
    const entry = entries.get(o);
    const committed = o < log.hw;
    let style = "";
    if (entry) {
      epochsSeen.add(entry[1]);
      style = `fill:${epochColor(entry[1])}${committed ? "" : ";fill-opacity:0.35"}`;
    }
    const cls = ["cell", committed ? "committed" : "pending", diverged.has(o) && entry ? "diverged" : ""];
    out.push(`<rect class="${cls.join(" ")}" data-offset="${o}" x="${x(o) + 1}" y="${y + 1}" width="${Math.max(1, cellW - 2)}" height="${barH - 2}" style="${style}"><title>offset ${o}${entry ? `, leader epoch ${entry[1]}, value ${esc(entry[2])}` : ""}</title></rect>`);
    if (entry && entry[2] !== null && cellW >= 14) {
      out.push(`<text class="value${committed ? "" : " dark"}" x="${x(o) + cellW / 2}" y="${y + 14}">${esc(String(entry[2]).slice(0, Math.max(1, Math.floor(cellW / 7))))}</text>`);
    }
  }
}

// Offsets once committed that the leader's log no longer holds: dashed red boxes (one span when
// the window is drawn as bars).
function drawLost(out, g, log, y, lost) {
  const { x, cellW } = g, barH = ROW.barH;
  const gone = lost.filter((o) => o >= log.leo && o >= g.lo);
  if (!gone.length) return;
  if (g.asCells) {
    for (const o of gone) {
      out.push(`<rect class="cell lost" data-offset="${o}" x="${x(o) + 1}" y="${y + 1}" width="${Math.max(1, cellW - 2)}" height="${barH - 2}"><title>offset ${o}: committed once, not in the leader's log</title></rect>`);
      out.push(`<text x="${x(o) + cellW / 2}" y="${y + 14}" text-anchor="middle" style="fill:#c62828;font-size:10px">lost</text>`);
    }
    return;
  }
  const first = gone[0], last = gone[gone.length - 1];
  out.push(`<rect class="cell lost" data-offset="${first}" x="${x(first)}" y="${y + 1}" width="${x(last + 1) - x(first)}" height="${barH - 2}"><title>offsets ${first}-${last}: committed once, not in the leader's log</title></rect>`);
  out.push(`<text x="${(x(first) + x(last + 1)) / 2}" y="${y + 14}" text-anchor="middle" style="fill:#c62828">${gone.length} committed offsets lost</text>`);
}

// Across the rows: the leader's HW, the highest HW ever seen when the leader is below it, and the
// offsets axis.
function drawPartitionMarks(out, g, part, leaderLog, bottom) {
  const { x, lo, hi } = g, top = ROW.top;
  if (leaderLog && leaderLog.hw >= lo) {
    const lx = x(leaderLog.hw);
    out.push(`<line class="leader-hw" x1="${lx}" y1="${top - 6}" x2="${lx}" y2="${bottom - 6}"></line>`);
    out.push(`<text x="${lx}" y="${top - 10}" text-anchor="middle" style="fill:#1f8a4c">leader HW ${leaderLog.hw}</text>`);
  }
  if (part.committed_end && leaderLog && part.committed_end > leaderLog.leo) {
    const cx = x(part.committed_end);
    out.push(`<line class="committed-mark" x1="${cx}" y1="${top - 6}" x2="${cx}" y2="${bottom - 6}"></line>`);
    out.push(`<text x="${cx + 4}" y="${top - 18}" style="fill:#c62828">highest HW ever seen ${part.committed_end}</text>`);
  }
  const step = Math.max(1, Math.ceil(g.span / 16));
  for (let o = lo; o <= hi; o += step) {
    out.push(`<text class="muted" x="${x(o) + (g.asCells ? g.cellW / 2 : 0)}" y="${bottom + 8}" text-anchor="middle">${o}</text>`);
  }
  out.push(`<text class="muted" x="${g.barX - 8}" y="${bottom + 8}" text-anchor="end">offset${lo > g.minStart ? ` (from ${g.minStart}) …` : ""}</text>`);
}

function replicaInfo(log, part) {
  if (log.role === "down") return "down: as last seen";
  if (log.role === "paused") return "paused: as last seen";
  if (log.role === "leader") return `leader in epoch ${log.leader_epoch ?? part.leader_epoch}`;
  if (log.lag_offsets === null || log.lag_offsets === undefined) return log.role;
  if (log.lag_offsets === 0) return "caught up";
  const seen = log.fetched_to !== null && log.fetched_to !== log.leo ? ` (leader has it at ${log.fetched_to})` : "";
  return `${log.lag_offsets} behind, ${(log.lag_ms / 1000).toFixed(1)} s${seen}`;
}

// --- the whole state ------------------------------------------------------------------------

function render(state) {
  const anomalies = state.anomalies || [];
  if (view.mode === "live") {
    const wall = new Date(state.wall_ms).toLocaleTimeString();
    $("#clock").textContent = `${wall} · t+${(state.time_ms / 1000).toFixed(1)} s`;
  } else {
    $("#clock").textContent = `t = ${state.time_ms} ms (simulated)`;
  }
  renderControllers(state.controllers || []);
  renderBrokers(state.brokers || [], state.partitions || []);
  renderPartitions(state.partitions || [], anomalies);
  const banner = $("#anomaly-banner");
  banner.hidden = !anomalies.length;
  banner.innerHTML = anomalies.map((a) => `<div data-anomaly="${esc(a.kind)}"><b>${esc(a.kind)}</b>${esc(a.text)}</div>`).join("");
  if (view.mode === "live") updateBurstTargets(state.partitions || []);
}

// --- timeline -------------------------------------------------------------------------------

function buildFilters() {
  $("#kind-filters").innerHTML = KINDS.map((k) => `<label><input type="checkbox" data-kind="${k}" checked> ${k}</label>`).join("");
  $("#kind-filters").addEventListener("change", (e) => {
    const box = e.target;
    if (box.checked) view.filters.add(box.dataset.kind); else view.filters.delete(box.dataset.kind);
    view.timelineKey = "";
    renderTimeline();
  });
}

function timeLabel(ms) {
  return view.mode === "live" ? `+${(ms / 1000).toFixed(1)} s` : `${ms} ms`;
}

function renderTimeline() {
  const list = $("#timeline");
  const shown = view.events.filter((e) => view.filters.has(e.kind));
  const key = `${shown.length}:${view.mode === "replay" ? view.frame : view.events.length}:${[...view.filters].join()}`;
  if (key === view.timelineKey) return;
  view.timelineKey = key;
  if (view.mode === "live") {
    list.innerHTML = shown.slice(-MAX_LIVE_EVENTS).reverse().map((e) =>
      `<li data-kind="${esc(e.kind)}"><span class="t">${timeLabel(e.time_ms)}</span><span class="kind">${esc(e.kind)}</span><span>${esc(e.text)}</span></li>`).join("");
    return;
  }
  let current = -1;
  shown.forEach((e, i) => { if (e.frame <= view.frame) current = i; });
  list.innerHTML = shown.map((e, i) => {
    const cls = e.frame > view.frame ? "future" : i === current ? "current" : "";
    return `<li class="${cls}" data-kind="${esc(e.kind)}" data-frame="${e.frame}"><span class="t">${timeLabel(e.time_ms)}</span><span class="kind">${esc(e.kind)}</span><span>${esc(e.text)}</span></li>`;
  }).join("");
  const li = list.children[current];
  if (li) list.scrollTop = Math.max(0, li.offsetTop - list.offsetTop - list.clientHeight / 2);
}

// --- live -----------------------------------------------------------------------------------

function startLive() {
  $("#actions-panel").hidden = false;
  const source = new EventSource("/api/stream");
  source.onopen = () => setStatus("live", "ok");
  source.onerror = () => setStatus("disconnected: retrying", "bad");
  source.onmessage = (message) => {
    const data = JSON.parse(message.data);
    if (data.reset) view.events = [];
    if (data.events && data.events.length) view.events.push(...data.events);
    if (view.events.length > 4 * MAX_LIVE_EVENTS) view.events.splice(0, view.events.length - 2 * MAX_LIVE_EVENTS);
    if (data.error) setStatus(`live, but the last poll failed: ${data.error}`, "bad");
    if (data.state) {
      if (!data.error) setStatus("live", "ok");
      view.state = data.state;
      render(data.state);
    }
    renderTimeline();
  };
  document.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    const node = Number(button.dataset.node);
    if (button.dataset.action === "isolate") act(button, "/api/links", { groups: [[node]] });
    else act(button, `/api/nodes/${node}/${button.dataset.action}`, {});
  });
  $("#cut-links").addEventListener("click", (e) => {
    const groups = $("#groups").value.trim().split(/\s+/).filter(Boolean).map(
      (g) => g.split(",").filter(Boolean).map(Number));
    act(e.target, "/api/links", { groups });
  });
  $("#heal-links").addEventListener("click", (e) => act(e.target, "/api/links", undefined, "DELETE"));
  $("#produce").addEventListener("click", (e) => {
    const [topic, partition] = splitPartition($("#burst-partition").value);
    act(e.target, "/api/produce", { topic, partition, count: Number($("#burst-count").value), acks: $("#burst-acks").value });
  });
}

function splitPartition(name) {
  const at = name.lastIndexOf("-");
  return [name.slice(0, at), Number(name.slice(at + 1))];
}

function updateBurstTargets(partitions) {
  const select = $("#burst-partition");
  const names = partitions.map((p) => `${p.topic}-${p.partition}`);
  if (names.join() === [...select.options].map((o) => o.value).join()) return;
  const chosen = select.value;
  select.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
  if (names.includes(chosen)) select.value = chosen;
}

async function act(button, path, body, method = "POST") {
  const headers = { "Content-Type": "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const result = $("#action-result");
  button.disabled = true;
  result.textContent = `${method} ${path} …`;
  try {
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const data = await response.json().catch(() => ({}));
    result.textContent = response.ok ? data.done : `${response.status} ${data.error || ""}: ${data.message || ""}`;
  } catch (err) {
    result.textContent = `failed: ${err}`;
  } finally {
    button.disabled = false;
    if (view.state) render(view.state);  // buttons back to what the state allows
  }
}

// --- replay ---------------------------------------------------------------------------------

async function startReplay() {
  const doc = await (await fetch("/api/replay")).json();
  view.frames = doc.frames;
  view.events = doc.events;
  view.anomalies = doc.anomalies || [];
  $("#replay-controls").hidden = false;
  if (doc.description) {
    $("#description").hidden = false;
    $("#description").textContent = doc.description;
  }
  $("#scrub").max = String(Math.max(0, view.frames.length - 1));
  $("#jump-anomaly").disabled = !view.anomalies.length;
  setStatus(`replay: ${view.frames.length} frames, ${view.anomalies.length ? view.anomalies.map((a) => a.kind).join(" and ") : "no anomaly"}`,
            view.anomalies.length ? "bad" : "ok");
  $("#replay-controls").addEventListener("click", (e) => {
    const button = e.target.closest("button[data-replay]");
    if (button) replayCommand(button.dataset.replay);
  });
  $("#scrub").addEventListener("input", (e) => { stop(); goTo(Number(e.target.value)); });
  $("#speed").addEventListener("change", () => { if (view.timer) { stop(); play(); } });
  $("#timeline").addEventListener("click", (e) => {
    const li = e.target.closest("li[data-frame]");
    if (li) { stop(); goTo(Number(li.dataset.frame)); }
  });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
    const command = { ArrowRight: "forward", ArrowLeft: "back", " ": "play", Home: "first", End: "last", a: "anomaly" }[e.key];
    if (command) { e.preventDefault(); replayCommand(command); }
  });
  goTo(0);
}

function replayCommand(command) {
  switch (command) {
    case "first": stop(); goTo(0); break;
    case "last": stop(); goTo(view.frames.length - 1); break;
    case "back": stop(); goTo(view.frame - 1); break;
    case "forward": stop(); goTo(view.frame + 1); break;
    case "play": if (view.timer) stop(); else play(); break;
    case "anomaly": {
      stop();
      const next = view.anomalies.find((a) => a.frame > view.frame) || view.anomalies[0];
      if (next) goTo(next.frame);
      break;
    }
  }
}

function play() {
  if (view.frame >= view.frames.length - 1) goTo(0);
  $("#play").innerHTML = "&#x23F8; pause";
  view.timer = setInterval(() => {
    if (view.frame >= view.frames.length - 1) stop(); else goTo(view.frame + 1);
  }, 1000 / Number($("#speed").value));
}

function stop() {
  if (view.timer) clearInterval(view.timer);
  view.timer = null;
  $("#play").innerHTML = "&#x25B6; play";
}

function goTo(index) {
  if (!view.frames.length) return;
  view.frame = Math.max(0, Math.min(index, view.frames.length - 1));
  const frame = view.frames[view.frame];
  view.state = frame.state;
  document.body.dataset.frame = String(view.frame);
  $("#scrub").value = String(view.frame);
  $("#frame-label").textContent = `frame ${view.frame} of ${view.frames.length} · ${frame.time_ms} ms`;
  render(frame.state);
  renderTimeline();
}

// --- start ----------------------------------------------------------------------------------

async function main() {
  const info = await (await fetch("/api/info")).json();
  view.mode = info.mode;
  document.body.dataset.mode = info.mode;
  $("#title").textContent = info.title;
  document.title = `kraftlab: ${info.title}`;
  if (info.token_required) {
    $("#token-box").hidden = false;
    $("#token").value = sessionStorage.getItem(TOKEN_KEY) || "";
    $("#token").addEventListener("change", (e) => sessionStorage.setItem(TOKEN_KEY, e.target.value.trim()));
  }
  buildFilters();
  if (info.mode === "live") startLive(); else await startReplay();
}

main().catch((err) => setStatus(`error: ${err}`, "bad"));
