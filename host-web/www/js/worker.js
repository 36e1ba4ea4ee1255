// The viewer's worker: holds the core (built with wasm-bindgen) and the opened file, and does
// every long piece of work (checking and decoding the file, layout, search, value statistics)
// off the page's thread. Messages: {id, type, args} in, {id, ok, result | error} out.
import init, { headerLength, bodyRange, coreVersion, Viewer } from "../pkg/torchlens_web.js";

const ready = init();
let viewer = null;
let file = null;

async function bytes(blob, start, end) {
  return new Uint8Array(await blob.slice(start, end).arrayBuffer());
}

// Errors from the core arrive as the JSON of {kind, code, message, remedy}.
function describe(error) {
  if (typeof error === "string") {
    try {
      return JSON.parse(error);
    } catch {
      return { kind: "viewer", code: "viewer_error", message: error, remedy: "" };
    }
  }
  if (error instanceof WebAssembly.RuntimeError) {
    return {
      kind: "viewer",
      code: "viewer_core_trapped",
      message: `the core stopped: ${error.message}`,
      remedy: "reload the page and open the file again; please report the file that did this",
      fatal: true,
    };
  }
  return {
    kind: "viewer",
    code: "viewer_error",
    message: String(error && error.message ? error.message : error),
    remedy: "reload the page and try again",
  };
}

const handlers = {
  async open({ blob }) {
    if (viewer) viewer.free();
    viewer = null;
    file = blob;
    const started = performance.now();
    // Only the header and the body are read; payload bytes stay in the file until asked for.
    const length = headerLength(await bytes(blob, 0, 8));
    const header = await bytes(blob, 0, 8 + length);
    const range = JSON.parse(bodyRange(header, blob.size));
    const body = await bytes(blob, range.offset, range.offset + range.length);
    viewer = new Viewer(header, body, blob.size);
    const decodedMs = performance.now() - started;
    const overview = JSON.parse(viewer.overview());
    const graph = JSON.parse(viewer.layout("[]", false));
    return { overview, graph, decodedMs, totalMs: performance.now() - started };
  },
  layout({ expanded, full, backward }) {
    if (backward) return JSON.parse(opened().backwardLayout());
    return JSON.parse(opened().layout(JSON.stringify(expanded), full));
  },
  rows({ start, count }) {
    return JSON.parse(opened().rows(start, count));
  },
  op({ id }) {
    return JSON.parse(opened().op(id));
  },
  search({ expression }) {
    return JSON.parse(opened().search(expression));
  },
  nodesOf({ ops }) {
    return Array.from(opened().nodesOf(Uint32Array.from(ops)));
  },
  async value({ id, offset, length }) {
    const current = opened();
    const data = await bytes(file, offset, offset + length);
    return JSON.parse(current.value(id, data));
  },
  version() {
    return coreVersion();
  },
};

function opened() {
  if (!viewer) {
    throw JSON.stringify({
      kind: "viewer",
      code: "viewer_no_file",
      message: "no file is open",
      remedy: "open a .tlspec file first",
    });
  }
  return viewer;
}

self.onmessage = async (event) => {
  const { id, type, args } = event.data;
  try {
    await ready;
    const handler = handlers[type];
    if (!handler) throw `{"kind":"viewer","code":"viewer_bad_request","message":"unknown request ${type}","remedy":""}`;
    const result = await handler(args || {});
    self.postMessage({ id, ok: true, result });
  } catch (error) {
    self.postMessage({ id, ok: false, error: describe(error) });
  }
};
