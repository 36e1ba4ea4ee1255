// The page's side of the worker: requests with ids, answered by promises, and a watchdog.
// A request that runs past its deadline (or a worker that dies) ends the worker and rejects
// with a typed error, so the tab never waits forever on a hostile file.

export class CoreClient {
  constructor(url) {
    this.url = url;
    this.nextId = 1;
    this.pending = new Map();
    this.onRestart = () => {};
    this.start();
  }

  start() {
    this.worker = new Worker(this.url, { type: "module" });
    this.worker.onmessage = (event) => this.settle(event.data);
    this.worker.onerror = (event) => {
      event.preventDefault();
      this.restart({
        kind: "viewer",
        code: "viewer_worker_failed",
        message: event.message || "the viewer's worker failed",
        remedy: "reload the page and open the file again",
      });
    };
  }

  settle({ id, ok, result, error }) {
    const entry = this.pending.get(id);
    if (!entry) return;
    this.pending.delete(id);
    clearTimeout(entry.timer);
    if (ok) entry.resolve(result);
    else {
      entry.reject(error);
      // After a trap the core's memory may be inconsistent: start a fresh worker.
      if (error && error.fatal) this.restart(error);
    }
  }

  restart(error) {
    this.worker.terminate();
    for (const entry of this.pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(error);
    }
    this.pending.clear();
    this.start();
    this.onRestart();
  }

  call(type, args = {}, { timeoutMs = 20000 } = {}) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // Every request still waiting is lost with the worker; all of them fail.
        this.restart({
          kind: "viewer",
          code: "viewer_timeout",
          message: `the ${type} request took longer than ${timeoutMs / 1000} s and was stopped`,
          remedy: "the file may be hostile or too large for the browser; try the tlspec CLI",
        });
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.worker.postMessage({ id, type, args });
    });
  }
}
