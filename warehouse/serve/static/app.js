// The dashboard's only script: draw the page's Plotly figures, and on a run page poll the
// run's version and redraw the page when a round, step or timing row lands.
"use strict";

function drawCharts(root) {
  const source = root.querySelector("#charts");
  if (!source) return;
  const charts = JSON.parse(source.textContent || "{}");
  for (const [id, figure] of Object.entries(charts)) {
    const el = root.querySelector("#" + CSS.escape(id));
    if (!el) continue;
    Plotly.react(el, figure.data, figure.layout, {displaylogo: false, responsive: true});
    el.dataset.traces = String(figure.data.length);
  }
  document.body.dataset.drawn = String(Date.now());
}

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
  main.querySelectorAll(".chart").forEach((el) => Plotly.purge(el));
  main.replaceWith(fresh);
  document.body.dataset.version = doc.body.dataset.version;
  drawCharts(document);
  return true;
}

function watchRun() {
  const body = document.body;
  const url = body.dataset.versionUrl;
  if (!url) return;
  const every = Number(body.dataset.refreshMs) || 5000;
  setStatus("live", "live");
  const tick = async () => {
    try {
      const response = await fetch(url, {cache: "no-store"});
      if (response.status === 503) {
        setStatus("busy: the warehouse is being written, retrying", "busy");
      } else if (response.ok) {
        const {version} = await response.json();
        if (version !== body.dataset.version && await refreshPage()) {
          setStatus("updated " + new Date().toLocaleTimeString(), "live");
        } else {
          setStatus("live, checked " + new Date().toLocaleTimeString(), "live");
        }
      }
    } catch (err) {
      setStatus("server unreachable, retrying", "busy");
    }
    window.setTimeout(tick, every);
  };
  window.setTimeout(tick, every);
}

document.addEventListener("DOMContentLoaded", () => {
  drawCharts(document);
  watchRun();
});
