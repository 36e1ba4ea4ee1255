// The op panel: what ran, where, on what; parents and children to follow; and, for a saved
// value, its statistics, histogram and heatmap.
import { drawHeatmap, drawHistogram, format } from "./value-view.js";

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

function facts(rows) {
  const list = element("dl", { class: "facts" });
  for (const [name, value] of rows) {
    if (value === null || value === undefined || value === "") continue;
    list.append(element("dt", {}, name), element("dd", {}, value));
  }
  return list;
}

export class OpPanel {
  constructor(root, { onFollow, onReveal, loadValue }) {
    this.root = root;
    this.onFollow = onFollow;
    this.onReveal = onReveal;
    this.loadValue = loadValue;
    this.current = null;
  }

  clear(message = "Click an op in the graph or the table.") {
    this.current = null;
    this.root.replaceChildren(element("p", { class: "hint" }, message));
  }

  links(title, refs) {
    if (!refs.length) return element("div", { class: "links" }, element("h4", {}, title), "none");
    return element(
      "div",
      { class: "links" },
      element("h4", {}, `${title} (${refs.length})`),
      ...refs.map((ref) =>
        element("button", { class: "op-link", "data-op": ref.id, onclick: () => this.onFollow(ref.id) }, ref.label),
      ),
    );
  }

  show(detail) {
    this.current = detail.id;
    const distance = (pair) => (pair ? `${pair[0] ?? "–"} … ${pair[1] ?? "–"} hops` : null);
    const header = element(
      "div",
      { class: "op-title" },
      element("h3", { id: "op-label" }, detail.label),
      element("button", { class: "small", onclick: () => this.onReveal(detail) }, "Show in graph"),
    );
    const values = element("div", { id: "op-values" });
    this.root.replaceChildren(
      header,
      facts([
        ["function", `${detail.func_name}${detail.op_type !== detail.func_name ? ` (${detail.op_type})` : ""}`],
        ["kind", detail.kind],
        ["name", detail.name],
        ["module", detail.module_stack.join(" ‹ ") + (detail.module_class ? ` [${detail.module_class}]` : "")],
        ["shape", detail.shape],
        ["dtype", detail.dtype],
        ["layer", `${detail.layer_label}, pass ${detail.pass} of ${detail.num_passes}`],
        ["output index", detail.output_index],
        ["in place", detail.in_place ? "yes" : null],
        ["source", detail.source || "not recorded"],
        ["site", detail.site],
        ["from input", distance(detail.from_input)],
        ["to output", distance(detail.to_output)],
        ["params", detail.params.map(([address, shape]) => `${address} ${shape}`).join(", ")],
        ["attributes", detail.attributes.map(([k, v]) => `${k}=${v}`).join(", ")],
        ["edits", detail.edits.join("; ")],
        ["extras", detail.extras.map(([k, v]) => `${k}=${v}`).join(", ")],
      ]),
      this.links("parents", detail.parents),
      this.links("children", detail.children),
      values,
    );
    if (!detail.payload) {
      values.append(element("p", { class: "hint", id: "no-value" }, "No saved value for this op in the file."));
      return;
    }
    values.append(element("p", { class: "hint" }, "Reading the saved value…"));
    this.loadValue(detail).then(
      (summary) => {
        if (this.current === detail.id) this.showValue(values, summary, detail);
      },
      (error) => {
        if (this.current !== detail.id) return;
        values.replaceChildren(
          element("p", { class: "error-inline" }, `[${error.code}] ${error.message}`),
        );
      },
    );
  }

  showValue(root, summary, detail) {
    const stats = summary.statistics;
    const partial = summary.elements_read < summary.elements_total;
    const histogram = element("canvas", { id: "histogram", width: 320, height: 110 });
    const children = [
      element("h4", {}, summary.magnitude ? "saved value (magnitudes)" : "saved value"),
      partial
        ? element("p", { class: "hint" },
            `Statistics of the first ${summary.elements_read} of ${summary.elements_total} elements.`)
        : null,
      facts([
        ["elements", String(stats.count)],
        ["min", format(stats.min)],
        ["max", format(stats.max)],
        ["mean", format(stats.mean)],
        ["std", format(stats.std)],
        ["zeros", String(stats.zeros)],
        ["nan / ±inf", `${stats.nan} / ${stats.positive_infinite} / ${stats.negative_infinite}`],
        ["stored at", `byte ${detail.payload.offset}, ${detail.payload.length} bytes (${detail.payload.storage_dtype})`],
      ]),
      element("h4", {}, "histogram"),
      histogram,
    ];
    let heatmap = null;
    if (summary.heatmap) {
      const map = summary.heatmap;
      heatmap = element("canvas", { id: "heatmap", width: 240, height: 240 });
      children.push(
        element("h4", {}, `heatmap ${map.slice} (${map.height}×${map.width}${map.rows < map.height || map.cols < map.width ? `, shown as ${map.rows}×${map.cols}` : ""})`),
        heatmap,
      );
    }
    root.replaceChildren(...children.filter(Boolean));
    drawHistogram(histogram, stats.histogram);
    if (heatmap) {
      const legend = drawHeatmap(heatmap, summary.heatmap);
      heatmap.after(element("p", { class: "hint", id: "heatmap-legend" }, legend));
    }
  }
}
