// The dashboard's only script: draw the page's Plotly figures (with the page's smoothing, log
// axis and x-axis choice), open the nodes behind a clicked point, sort, search and pick columns
// of tables, and on a run page poll the run's version and redraw when a round or step lands.
"use strict";

const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf"];
const X_TITLES = {global: "global step (lineage)", wall: "wall time (UTC)"};

// The wall-time axis says when its times are the files' mtimes (a copied root's copy time)
// rather than the run's own clock (its trainer's commits, the time in its files' names).
function xTitle(figure, x) {
  if (x !== "wall") return X_TITLES[x];
  const froms = new Set(figure.data.flatMap((t) => (t.meta && t.meta.wall_from) || []));
  if (!froms.has("file time")) return X_TITLES.wall;
  return froms.size === 1 ? "wall time (UTC): file modification times, not the run's clock"
                          : "wall time (UTC; file modification time where the files carry none)";
}

function controls() {
  const get = (id) => document.getElementById(id);
  return {
    smoothing: Number(get("smoothing") ? get("smoothing").value : 0),
    logY: Boolean(get("log-y") && get("log-y").checked),
    x: get("x-axis") ? get("x-axis").value : "round",
  };
}

// W&B's debiased exponential moving average, over the points that have a value
function smooth(values, weight) {
  let last = 0, n = 0;
  return values.map((v) => {
    if (v === null || v === undefined) return null;
    last = last * weight + (1 - weight) * v;
    n += 1;
    return last / (1 - Math.pow(weight, n));
  });
}

// The figure as the controls ask: x swapped to global step or wall time, lines smoothed (the
// raw line kept faint behind), y on a log scale where the panel allows it.
function arrange(figure, ctl) {
  const meta = figure.layout.meta || {};
  const layout = JSON.parse(JSON.stringify(figure.layout));
  delete layout.title;  // drawn above the chart, clear of the mode bar
  const data = [];
  figure.data.forEach((source, i) => {
    const trace = Object.assign({}, source);
    const xs = source.meta && source.meta.xs;
    if (ctl.x !== "round" && xs && xs[ctl.x]) trace.x = xs[ctl.x];
    const colour = (source.line && source.line.color) || (source.marker && source.marker.color) || COLOURS[i % COLOURS.length];
    if (meta.smooth && ctl.smoothing > 0 && source.type === "scatter") {
      data.push(Object.assign({}, trace, {opacity: 0.25, showlegend: false, hoverinfo: "skip",
                                          line: Object.assign({}, source.line, {color: colour})}));
      trace.y = smooth(source.y, ctl.smoothing);
      trace.line = Object.assign({}, source.line, {color: colour});
      trace.marker = Object.assign({}, source.marker, {color: colour});
      trace.mode = "lines";
    }
    data.push(trace);
  });
  if (ctl.x !== "round" && !meta.empty && figure.data.some((t) => t.meta && t.meta.xs)) {
    for (const key of Object.keys(layout).filter((k) => k.startsWith("xaxis"))) {
      const axis = layout[key];
      delete axis.tickmode; delete axis.dtick; delete axis.tickformat; delete axis.range;
      axis.type = ctl.x === "wall" ? "date" : "linear";
      axis.title = {text: xTitle(figure, ctl.x)};
    }
  }
  if (meta.loggable && ctl.logY && !meta.empty) {
    for (const key of Object.keys(layout).filter((k) => k.startsWith("yaxis"))) {
      layout[key].type = "log";
      delete layout[key].range;
    }
  }
  return {data, layout};
}

function titleOf(el, figure) {
  const text = figure.layout.title && figure.layout.title.text;
  if (!text) return;
  let panel = el.parentNode;
  if (!panel.classList.contains("panel")) {  // wrap the chart with its title: one grid cell
    panel = document.createElement("div");
    panel.className = "panel";
    el.parentNode.insertBefore(panel, el);
    const caption = document.createElement("div");
    caption.className = "chart-title";
    panel.append(caption, el);
  }
  panel.querySelector(".chart-title").textContent = text;
}

// A clicked point -> the nodes behind it: a reward point is one node; a bar or line point is a
// round (customdata) of the trace's filter; a histogram bin is a response-length range.
function nodesUrl(point) {
  const meta = point.data.meta || {};
  const link = meta.link;
  if (!link) return null;
  const cd = point.customdata;
  if (Array.isArray(cd)) return `${link.url}/${encodeURIComponent(cd[0])}?round=${cd[1]}`;
  const params = new URLSearchParams(link.params || {});
  if (meta.bins === "tokens") {
    const bins = point.fullData.xbins;
    const lo = bins.start + point.binNumber * bins.size;
    params.set("tokens_min", String(Math.ceil(lo)));
    params.set("tokens_max", String(Math.ceil(lo + bins.size) - 1));
  } else if (cd !== undefined && cd !== null) {
    params.set("round", String(cd));
  }
  return `${link.url}?${params}`;
}

function drawCharts(root) {
  const source = root.querySelector("#charts");
  if (!source) return;
  const charts = JSON.parse(source.textContent || "{}");
  const ctl = controls();
  for (const [id, figure] of Object.entries(charts)) {
    const el = root.querySelector("#" + CSS.escape(id));
    if (!el) continue;
    titleOf(el, figure);
    const shown = arrange(figure, ctl);
    Plotly.react(el, shown.data, shown.layout, {displaylogo: false, responsive: true,
      modeBarButtonsToRemove: ["lasso2d", "select2d"]});
    el.dataset.traces = String(figure.data.length);
    if (!el.dataset.clicks) {
      el.dataset.clicks = "1";
      el.on("plotly_click", (event) => {
        const url = event.points.length ? nodesUrl(event.points[0]) : null;
        if (url) window.location.href = url;
      });
    }
  }
  document.body.dataset.drawn = String(Date.now());
}

function watchControls() {
  const panel = document.getElementById("chart-controls");
  if (!panel) return;
  const saved = JSON.parse(sessionStorage.getItem("chart-controls") || "{}");
  if (saved.smoothing !== undefined) document.getElementById("smoothing").value = saved.smoothing;
  if (saved.logY !== undefined) document.getElementById("log-y").checked = saved.logY;
  if (saved.x) document.getElementById("x-axis").value = saved.x;
  const redraw = () => {
    const ctl = controls();
    document.getElementById("smoothing-value").textContent = ctl.smoothing.toFixed(2);
    sessionStorage.setItem("chart-controls", JSON.stringify(ctl));
    drawCharts(document);
  };
  panel.addEventListener("input", redraw);
  panel.addEventListener("change", redraw);
  document.getElementById("smoothing-value").textContent = controls().smoothing.toFixed(2);
}

// --- tables: sort by a header click, search rows, pick columns --------------------------------

function cellValue(row, index) {
  const cell = row.cells[index];
  return cell ? (cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim()) : "";
}

function sortTable(table, index, th) {
  const numeric = th.dataset.type === "number";
  const direction = th.getAttribute("aria-sort") === "descending" ? "ascending" : "descending";
  table.querySelectorAll("th[aria-sort]").forEach((h) => h.removeAttribute("aria-sort"));
  th.setAttribute("aria-sort", direction);
  const sign = direction === "ascending" ? 1 : -1;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const key = (row) => {
    const v = cellValue(row, index);
    if (!numeric) return v;
    return v === "" || isNaN(Number(v)) ? null : Number(v);
  };
  rows.sort((a, b) => {
    const ka = key(a), kb = key(b);
    if (ka === kb) return 0;
    if (ka === null || ka === "") return 1;   // empty cells last either way
    if (kb === null || kb === "") return -1;
    return (numeric ? ka - kb : String(ka).localeCompare(String(kb))) * sign;
  });
  rows.forEach((row) => body.appendChild(row));
}

function makeSortable(table) {
  Array.from(table.tHead.rows[0].cells).forEach((th, index) => {
    if (th.dataset.col === "pick") return;
    th.classList.add("sort");
    th.addEventListener("click", () => sortTable(table, index, th));
  });
}

function makeSearchable(input) {
  const table = document.getElementById(input.dataset.table);
  const count = document.getElementById("runs-count");
  input.addEventListener("input", () => {
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const row of table.tBodies[0].rows) {
      const text = row.textContent.toLowerCase();
      const hit = words.every((w) => text.includes(w));
      row.hidden = !hit;
      shown += hit ? 1 : 0;
    }
    if (count) count.textContent = words.length ? `${shown} of ${count.dataset.total} runs match` : `${count.dataset.total} runs`;
  });
}

function makePickable(picker) {
  const table = document.getElementById(picker.dataset.table);
  const storeKey = "columns:" + picker.dataset.table;
  const saved = JSON.parse(localStorage.getItem(storeKey) || "null");
  const box = picker.querySelector(".choices");
  const show = (col, on) => table.querySelectorAll(`[data-col="${CSS.escape(col)}"]`).forEach((c) => { c.hidden = !on; });
  const state = {};
  for (const th of table.tHead.rows[0].cells) {
    const col = th.dataset.col;
    if (!col || th.dataset.fixed !== undefined) continue;
    const on = saved && col in saved ? saved[col] : th.dataset.hidden === undefined;
    state[col] = on;
    const label = document.createElement("label");
    const tick = document.createElement("input");
    tick.type = "checkbox";
    tick.checked = on;
    tick.dataset.col = col;
    tick.addEventListener("change", () => {
      state[col] = tick.checked;
      show(col, tick.checked);
      localStorage.setItem(storeKey, JSON.stringify(state));
    });
    label.append(tick, " " + th.textContent.replace(/\s+/g, " ").trim());
    box.appendChild(label);
    show(col, on);
  }
}

function setUpTables(root) {
  root.querySelectorAll("table.sortable").forEach(makeSortable);
  root.querySelectorAll("input[data-table]").forEach(makeSearchable);
  root.querySelectorAll("details.column-picker").forEach(makePickable);
}

// --- the live run page -----------------------------------------------------------------------

function setStatus(text, cls) {
  const el = document.getElementById("live-status");
  if (!el) return;
  el.textContent = text;
  el.className = "live-status " + (cls || "");
}

async function refreshPage() {
  const response = await fetch(window.location.href, {cache: "no-store"});
  if (!response.ok) return false;
  const doc = new DOMParser().parseFromString(await response.text(), "text/html");
  const fresh = doc.getElementById("main");
  if (!fresh || doc.body.dataset.version === undefined) return false;
  const main = document.getElementById("main");
  // keep the reader's chart controls and open panels across the redraw
  const keep = document.getElementById("chart-controls");
  const freshControls = fresh.querySelector("#chart-controls");
  if (keep && freshControls) freshControls.replaceWith(keep);
  main.querySelectorAll("details[id]").forEach((d) => {
    const twin = fresh.querySelector("#" + CSS.escape(d.id));
    if (twin) twin.open = d.open;
  });
  main.querySelectorAll(".chart").forEach((el) => Plotly.purge(el));
  main.replaceWith(fresh);
  document.body.dataset.version = doc.body.dataset.version;
  document.body.dataset.runState = doc.body.dataset.runState || "";
  drawCharts(document);
  setUpTables(fresh);
  return true;
}

// A run that ended (finished, failed, stopped) gets no new rows: the header says its state and
// the page stops polling. A running one is polled; a lost or imported one may still gain rounds
// (a late commit, a re-ingest), so it is polled too; the header says the state either way.
const ENDED = new Set(["finished", "failed", "stopped"]);

function runStatus() {
  return document.body.dataset.runState || "live";
}

function watchRun() {
  const body = document.body;
  const url = body.dataset.versionUrl;
  if (!url) return;
  const every = Number(body.dataset.refreshMs) || 5000;
  if (ENDED.has(body.dataset.runState)) {
    setStatus(body.dataset.runState, "ended");
    return;
  }
  setStatus(runStatus(), "live");
  const tick = async () => {
    try {
      const response = await fetch(url, {cache: "no-store"});
      if (response.status === 503) {
        setStatus("busy: the warehouse is being written, retrying", "busy");
      } else if (response.ok) {
        const {version} = await response.json();
        if (version !== body.dataset.version && await refreshPage()) {
          if (ENDED.has(body.dataset.runState)) {
            setStatus(body.dataset.runState, "ended");
            return;  // its last rows are drawn: nothing more will land
          }
          setStatus(runStatus() + ", updated " + new Date().toLocaleTimeString(), "live");
        } else {
          setStatus(runStatus() + ", checked " + new Date().toLocaleTimeString(), "live");
        }
      }
    } catch (err) {
      setStatus("server unreachable, retrying", "busy");
    }
    window.setTimeout(tick, every);
  };
  window.setTimeout(tick, every);
}

// The node page's token section is read apart (its arrays live with 2,048 payloads' worth of
// others): the page shows first, then its tokens arrive here.
async function loadTokens() {
  const section = document.getElementById("tokens-section");
  if (!section || !section.dataset.src) return;
  try {
    const response = await fetch(section.dataset.src);
    if (!response.ok) throw new Error(String(response.status));
    const holder = document.createElement("div");
    holder.innerHTML = await response.text();
    section.replaceWith(holder.firstElementChild);
    if (window.location.hash) {
      const target = document.getElementById(window.location.hash.slice(1));
      if (target) target.scrollIntoView();
    }
  } catch (err) {
    const note = document.getElementById("tokens-loading");
    if (note) note.append(" Could not load them (" + err.message + "); open them with the link.");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  loadTokens();
  watchControls();
  drawCharts(document);
  setUpTables(document);
  watchRun();
});
