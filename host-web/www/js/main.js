// The viewer page: open a .tlspec (file picker, drag and drop, or ?file=URL), then show its
// status, graph, table, op panel and search. All core work happens in the worker.
import { CoreClient } from "./client.js";
import { GraphView } from "./graph-view.js";
import { OpPanel } from "./op-panel.js";
import { TableView } from "./table-view.js";

const $ = (id) => document.getElementById(id);
const client = new CoreClient(new URL("./worker.js", import.meta.url));
const state = { expanded: [], full: false, backward: false, opCount: 0, matches: [], open: false };
const params = new URL(location.href).searchParams;
// How long opening a file may take before the worker is stopped (`?open-deadline-ms=`).
const OPEN_DEADLINE_MS = Number(params.get("open-deadline-ms")) || 30000;

const graph = new GraphView($("graph"), {
  onNodeClick: (node, index) => {
    if (node.kind === "module") expand(node.label);
    else selectOp(node.op, { fromGraph: index });
  },
});
const table = new TableView($("table"), {
  fetchRows: (start, count) => client.call("rows", { start, count }),
  onSelect: (id) => selectOp(id),
});
const panel = new OpPanel($("op-panel"), {
  onFollow: (id) => selectOp(id),
  onReveal: (detail) => reveal(detail),
  loadValue: (detail) =>
    client.call("value", { id: detail.id, offset: detail.payload.offset, length: detail.payload.read_length }),
});

client.onRestart = () => {
  if (state.open) showError({
    kind: "viewer", code: "viewer_worker_restarted",
    message: "the viewer's worker was restarted and the file was closed",
    remedy: "open the file again",
  });
  state.open = false;
};

function showError(error, name) {
  $("error").hidden = false;
  $("error-title").textContent = name ? `Could not open ${name}` : "Something went wrong";
  $("error-code").textContent = error.code || "viewer_error";
  $("error-message").textContent = error.message || String(error);
  $("error-remedy").textContent = error.remedy ? `What to do: ${error.remedy}` : "";
  document.body.dataset.state = "error";
}

function setBusy(text) {
  $("busy").textContent = text || "";
  $("busy").hidden = !text;
}

async function openBlob(blob, name) {
  const started = performance.now();
  $("error").hidden = true;
  document.body.dataset.state = "loading";
  setBusy(`Checking ${name}…`);
  state.open = false;
  try {
    const opened = await client.call("open", { blob }, { timeoutMs: OPEN_DEADLINE_MS });
    state.open = true;
    state.expanded = [];
    state.full = false;
    state.backward = false;
    $("toggle-backward").hidden = !opened.overview.backward;
    state.opCount = opened.overview.counts.ops;
    showOverview(opened.overview, name, blob.size);
    table.reset(state.opCount);
    panel.clear();
    clearSearch();
    graph.onFirstFrame = () => {
      const ms = performance.now() - started;
      document.body.dataset.firstRenderMs = ms.toFixed(1);
      // Since the page started loading: includes fetching and compiling the core.
      document.body.dataset.sincePageLoadMs = performance.now().toFixed(1);
      $("timing").textContent =
        `checked and decoded in ${opened.decodedMs.toFixed(0)} ms, first drawn after ${ms.toFixed(0)} ms`;
      document.body.dataset.state = "ready";
    };
    graph.show(opened.graph);
    updateGraphBar(opened.graph);
  } catch (error) {
    showError(error, name);
    $("file-name").textContent = name;
    $("status").replaceChildren();
    $("manifest").textContent = "";
    $("timing").textContent = "";
    $("graph-info").textContent = "";
    clearSearch();
    table.reset(0);
    graph.show({ width: 0, height: 0, nodes: [], edges: [] });
    panel.clear("No file open.");
  } finally {
    setBusy("");
  }
}

function showOverview(overview, name, size) {
  $("file-name").textContent = name;
  const c = overview.counts;
  const items = [];
  const add = (text, kind = "") => {
    const span = document.createElement("span");
    span.className = `badge ${kind}`;
    span.textContent = text;
    items.push(span);
    return span;
  };
  add(`checked by torchlens-core ${overview.core_version}: header, body and payload table valid`, "ok").id = "check-status";
  const capture = overview.capture;
  const captureBadge = capture.verified
    ? add("capture complete", "ok")
    : add(`capture may be incomplete: ${capture.reason || "no reason recorded"}`, "warn");
  captureBadge.id = "capture-status";
  if (capture.stop_reason) {
    add(`stopped early: ${capture.stop_reason} (at ${capture.frontier.join(", ") || "?"})`, "warn");
  }
  add("replay validation: not stored in .tlspec files (run trace.validate_forward_pass() in Python)", "muted");
  add(`${c.ops} ops · ${c.layers} layers · ${c.modules} modules · ${c.params} params · ${c.saved} saved values`);
  const backward = overview.backward;
  if (backward) {
    add(
      `backward pass: ${backward.passes} pass${backward.passes === 1 ? "" : "es"} · ${backward.grad_fns} grad_fns · ` +
        `${backward.edges} edges · ${backward.saved_grads} saved gradients`,
      "ok",
    ).id = "backward-status";
  }
  add(size < 1048576 ? `${(size / 1024).toFixed(1)} KiB` : `${(size / 1048576).toFixed(1)} MiB`);
  const manifest = overview.manifest.filter(([, value]) => value).map(([k, v]) => `${k}: ${v}`).join(" · ");
  $("manifest").textContent = manifest;
  $("status").replaceChildren(...items);
}

function updateGraphBar(view) {
  const boxes = view.nodes.filter((node) => node.kind === "module").length;
  $("graph-info").textContent = state.backward
    ? `backward graph: ${view.nodes.length} grad_fns, ${view.edges.length} edges`
    : state.full
      ? `every op: ${view.nodes.length} nodes`
      : `${view.nodes.length} nodes, ${boxes} module boxes (click a box to open it)`;
  $("toggle-full").textContent = state.full ? "Overview by module" : "Every op";
  $("toggle-backward").textContent = state.backward ? "Forward graph" : "Backward graph";
}

async function relayout(keep = true) {
  setBusy("Laying out…");
  try {
    const view = await client.call(
      "layout",
      { expanded: state.expanded, full: state.full, backward: state.backward },
      { timeoutMs: 60000 },
    );
    graph.show(view, { keep });
    updateGraphBar(view);
    // Keep the selected op selected in the new view.
    if (panel.current !== null) {
      const [node] = await client.call("nodesOf", { ops: [panel.current] });
      if (node !== undefined) graph.select(node);
    }
    if (state.matches.length) graph.highlight(await client.call("nodesOf", { ops: state.matches }));
  } catch (error) {
    showError(error);
  } finally {
    setBusy("");
  }
}

async function expand(label) {
  if (!state.expanded.includes(label)) state.expanded.push(label);
  await relayout(true);
}

async function reveal(detail) {
  // Open every module call the op ran in, then center on it.
  state.full = false;
  state.backward = false;
  for (const call of detail.module_stack) {
    if (call !== "self" && !state.expanded.includes(call)) state.expanded.push(call);
  }
  await relayout(true);
  await selectOp(detail.id);
}

async function selectOp(id, { fromGraph = -1 } = {}) {
  try {
    const detail = await client.call("op", { id });
    panel.show(detail);
    table.select(id);
    const node = fromGraph >= 0 ? fromGraph : detail.node;
    if (node !== null && node !== undefined && node >= 0) {
      graph.select(node);
      if (fromGraph < 0) graph.center(node);
    }
  } catch (error) {
    showError(error);
  }
}

function clearSearch() {
  state.matches = [];
  $("search-input").value = "";
  $("search-result").replaceChildren();
  $("search-error").textContent = "";
  graph.highlight([]);
}

async function search(expression) {
  if (!expression.trim()) return clearSearch();
  try {
    const result = await client.call("search", { expression });
    state.matches = result.ops;
    $("search-error").textContent = "";
    graph.highlight(result.nodes);
    const count = document.createElement("p");
    count.id = "search-count";
    count.textContent = (result.count === 1 ? "1 op matches" : `${result.count} ops match`) +
      (result.count > result.listed.length ? ` (first ${result.listed.length} listed)` : "");
    const list = document.createElement("div");
    list.className = "matches";
    for (const [id, label] of result.listed) {
      const button = document.createElement("button");
      button.className = "op-link";
      button.dataset.op = String(id);
      button.textContent = label;
      button.addEventListener("click", () => selectOp(id));
      list.append(button);
    }
    $("search-result").replaceChildren(count, list);
  } catch (error) {
    state.matches = [];
    graph.highlight([]);
    $("search-result").replaceChildren();
    $("search-error").textContent = `[${error.code}] ${error.message}`;
  }
}

// Opening files.
$("file-input").addEventListener("change", (event) => {
  const file = event.target.files[0];
  if (file) openBlob(file, file.name);
});
document.addEventListener("dragover", (event) => {
  event.preventDefault();
  document.body.classList.add("dropping");
});
document.addEventListener("dragleave", () => document.body.classList.remove("dropping"));
document.addEventListener("drop", (event) => {
  event.preventDefault();
  document.body.classList.remove("dropping");
  const file = event.dataTransfer.files[0];
  if (file) openBlob(file, file.name);
});
$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  search($("search-input").value);
});
$("fit").addEventListener("click", () => graph.fit());
$("top").addEventListener("click", () => graph.home());
$("collapse-all").addEventListener("click", () => {
  state.expanded = [];
  state.full = false;
  state.backward = false;
  relayout(false);
});
$("toggle-full").addEventListener("click", () => {
  state.full = !state.full;
  state.backward = false;
  relayout(false);
});
$("toggle-backward").addEventListener("click", () => {
  state.backward = !state.backward;
  relayout(false);
});

// `?file=URL` opens a file the page's server offers (how `tlspec view FILE` can open one).
const url = params.get("file");
if (url) {
  fetch(url)
    .then((response) => {
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return response.blob();
    })
    .then((blob) => openBlob(blob, url.split("/").pop()))
    .catch((error) =>
      showError({ kind: "viewer", code: "viewer_fetch_failed", message: `${url}: ${error.message}`, remedy: "check the address" }, url),
    );
}

// For tests and the console: the drawn nodes, where one is on screen, the current view.
window.tlViewer = {
  locate: (label) => graph.locate(label),
  nodes: () => (graph.graph ? graph.graph.nodes.map(({ label, kind, detail }) => ({ label, kind, detail })) : []),
  edges: () => (graph.graph ? graph.graph.edges.map(({ from, to }) => [from, to]) : []),
  view: () => ({ scale: graph.scale, tx: graph.tx, ty: graph.ty }),
  state,
};
document.body.dataset.state = "empty";
