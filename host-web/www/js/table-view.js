// The summary table, virtualised: only the rows in view exist in the page, and rows are fetched
// from the worker a page at a time, so a trace of any size scrolls smoothly.

const ROW_HEIGHT = 24;
const PAGE = 256;
const COLUMNS = ["#", "label", "function", "module", "shape", "dtype", "parents", "saved"];

export class TableView {
  constructor(element, { fetchRows, onSelect }) {
    this.element = element;
    this.fetchRows = fetchRows;
    this.onSelect = onSelect;
    this.count = 0;
    this.pages = new Map();
    this.selected = -1;
    element.innerHTML = "";
    this.head = document.createElement("div");
    this.head.className = "row head";
    for (const name of COLUMNS) {
      const cell = document.createElement("span");
      cell.textContent = name;
      this.head.append(cell);
    }
    this.viewport = document.createElement("div");
    this.viewport.className = "table-viewport";
    this.spacer = document.createElement("div");
    this.spacer.className = "table-spacer";
    this.viewport.append(this.spacer);
    element.append(this.head, this.viewport);
    this.viewport.addEventListener("scroll", () => this.render());
    new ResizeObserver(() => this.render()).observe(this.viewport);
    this.viewport.addEventListener("click", (event) => {
      const row = event.target.closest("[data-op]");
      if (row) this.onSelect(Number(row.dataset.op));
    });
  }

  reset(count) {
    this.count = count;
    this.generation = (this.generation || 0) + 1;
    this.pages = new Map();
    this.selected = -1;
    this.spacer.style.height = `${count * ROW_HEIGHT}px`;
    this.viewport.scrollTop = 0;
    this.render();
  }

  select(id) {
    this.selected = id;
    const top = id * ROW_HEIGHT;
    const view = this.viewport;
    if (top < view.scrollTop || top + ROW_HEIGHT > view.scrollTop + view.clientHeight) {
      view.scrollTop = Math.max(0, top - view.clientHeight / 2);
    }
    this.render();
  }

  page(index) {
    if (!this.pages.has(index)) {
      const generation = this.generation;
      this.pages.set(index, null);
      this.fetchRows(index * PAGE, PAGE).then(
        (rows) => {
          if (generation !== this.generation) return;
          this.pages.set(index, rows);
          this.render();
        },
        () => this.pages.delete(index),
      );
    }
    return this.pages.get(index);
  }

  render() {
    const view = this.viewport;
    const first = Math.max(0, Math.floor(view.scrollTop / ROW_HEIGHT) - 5);
    const last = Math.min(this.count, Math.ceil((view.scrollTop + view.clientHeight) / ROW_HEIGHT) + 5);
    const rows = [];
    for (let id = first; id < last; id += 1) {
      const page = this.page(Math.floor(id / PAGE));
      const row = document.createElement("div");
      row.className = id === this.selected ? "row selected" : "row";
      row.style.top = `${id * ROW_HEIGHT}px`;
      row.dataset.op = String(id);
      const data = page && page[id % PAGE];
      const cells = data
        ? [id, data.label, data.func_name, data.module, data.shape, data.dtype,
           data.parents.join(", "), data.saved ? "yes" : ""]
        : [id, "…"];
      for (const value of cells) {
        const cell = document.createElement("span");
        cell.textContent = String(value);
        row.append(cell);
      }
      rows.push(row);
    }
    this.spacer.replaceChildren(...rows);
  }
}
