// The graph on a canvas: the core's layout drawn with pan (drag) and zoom (wheel). Only what
// is on screen is drawn, and far out boxes lose their text, so a graph of tens of thousands of
// nodes stays smooth.

const COLORS = {
  module: ["#eef3fb", "#5b7db1"],
  Input: ["#e8f6ea", "#3d8b4f"],
  Output: ["#fdecea", "#b4473c"],
  Constant: ["#f4f4f4", "#888888"],
  Buffer: ["#f4f4f4", "#888888"],
  LiteralProducer: ["#f4f4f4", "#888888"],
  Compute: ["#ffffff", "#444444"],
};

export class GraphView {
  constructor(canvas, { onNodeClick }) {
    this.canvas = canvas;
    this.edgesOf = new Map();
    this.context = canvas.getContext("2d");
    this.onNodeClick = onNodeClick;
    this.graph = null;
    this.scale = 1;
    this.tx = 0;
    this.ty = 0;
    this.highlighted = new Set();
    this.selected = -1;
    this.dirty = false;
    this.frames = 0;
    this.onFirstFrame = null;
    this.listen();
    new ResizeObserver(() => this.resize()).observe(canvas.parentElement);
  }

  resize() {
    const box = this.canvas.parentElement.getBoundingClientRect();
    const ratio = window.devicePixelRatio || 1;
    this.width = Math.max(1, box.width);
    this.height = Math.max(1, box.height);
    this.canvas.width = Math.round(this.width * ratio);
    this.canvas.height = Math.round(this.height * ratio);
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${this.height}px`;
    this.ratio = ratio;
    this.request();
  }

  // Shows a new layout; `keep` keeps the current view when only part of the graph changed.
  show(graph, { keep = false } = {}) {
    this.graph = graph;
    this.edgeBoxes = graph.edges.map((edge) => {
      let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
      for (let i = 0; i < edge.points.length; i += 2) {
        x0 = Math.min(x0, edge.points[i]);
        x1 = Math.max(x1, edge.points[i]);
        y0 = Math.min(y0, edge.points[i + 1]);
        y1 = Math.max(y1, edge.points[i + 1]);
      }
      return [x0, y0, x1, y1];
    });
    this.edgesOf = new Map();
    graph.edges.forEach((edge, index) => {
      for (const node of [edge.from, edge.to]) {
        if (!this.edgesOf.has(node)) this.edgesOf.set(node, []);
        this.edgesOf.get(node).push(index);
      }
    });
    this.selected = -1;
    this.highlighted = new Set();
    if (!keep) this.home();
    this.canvas.dataset.nodes = String(graph.nodes.length);
    this.request();
  }

  // The whole graph on screen (however small that makes it).
  fit() {
    if (!this.graph) return;
    if (!this.width) this.resize();
    const fit = Math.min(this.width / (this.graph.width + 40), this.height / (this.graph.height + 40));
    this.scale = Math.max(0.0001, Math.min(1, fit));
    this.tx = (this.width - this.graph.width * this.scale) / 2;
    this.ty = 20 * this.scale;
    this.request();
  }

  // The top of the graph: all of it when it fits readably, else its top at full size.
  home() {
    if (!this.graph) return;
    if (!this.width) this.resize();
    const fit = Math.min(this.width / (this.graph.width + 40), this.height / (this.graph.height + 40));
    // A graph too big to fit readably starts at full size, at its top.
    this.scale = fit >= 0.5 ? Math.min(1, fit) : 1;
    this.tx = (this.width - this.graph.width * this.scale) / 2;
    this.ty = 20;
    this.request();
  }

  // Centers node `index` on screen.
  center(index) {
    const node = this.graph && this.graph.nodes[index];
    if (!node) return;
    if (this.scale < 0.6) this.scale = 0.8;
    this.tx = this.width / 2 - (node.x + node.w / 2) * this.scale;
    this.ty = this.height / 2 - (node.y + node.h / 2) * this.scale;
    this.request();
  }

  select(index) {
    this.selected = index;
    this.request();
  }

  highlight(nodes) {
    this.highlighted = new Set(nodes);
    this.request();
  }

  // Screen position (client coordinates) of the center of the node labelled `label`, after
  // centering it; null when the graph has no such node.
  locate(label) {
    if (!this.graph) return null;
    const index = this.graph.nodes.findIndex((node) => node.label === label);
    if (index < 0) return null;
    this.center(index);
    this.draw();
    const node = this.graph.nodes[index];
    const box = this.canvas.getBoundingClientRect();
    return {
      x: box.left + (node.x + node.w / 2) * this.scale + this.tx,
      y: box.top + (node.y + node.h / 2) * this.scale + this.ty,
    };
  }

  request() {
    if (this.dirty) return;
    this.dirty = true;
    requestAnimationFrame(() => {
      this.dirty = false;
      this.draw();
    });
  }

  draw() {
    const context = this.context;
    context.setTransform(this.ratio, 0, 0, this.ratio, 0, 0);
    context.clearRect(0, 0, this.width, this.height);
    if (!this.graph) return;
    context.setTransform(
      this.ratio * this.scale, 0, 0, this.ratio * this.scale,
      this.ratio * this.tx, this.ratio * this.ty,
    );
    // The visible part of the layout, in layout coordinates.
    const left = -this.tx / this.scale;
    const top = -this.ty / this.scale;
    const right = left + this.width / this.scale;
    const bottom = top + this.height / this.scale;
    const visible = (x0, y0, x1, y1) => x1 >= left && x0 <= right && y1 >= top && y0 <= bottom;

    // One screen pixel however far out.
    context.lineWidth = 1 / this.scale;
    context.strokeStyle = "#9aa3ad";
    context.beginPath();
    this.graph.edges.forEach((edge, index) => {
      const [x0, y0, x1, y1] = this.edgeBoxes[index];
      if (!visible(x0, y0, x1, y1)) return;
      const p = edge.points;
      context.moveTo(p[0], p[1]);
      for (let i = 2; i < p.length; i += 2) context.lineTo(p[i], p[i + 1]);
    });
    context.stroke();
    // The selected node's edges, on top: where its inputs come from and its outputs go.
    if (this.selected >= 0) {
      context.strokeStyle = "#d9480f";
      context.lineWidth = 2 / this.scale;
      context.beginPath();
      for (const index of this.edgesOf.get(this.selected) || []) {
        const p = this.graph.edges[index].points;
        context.moveTo(p[0], p[1]);
        for (let i = 2; i < p.length; i += 2) context.lineTo(p[i], p[i + 1]);
      }
      context.stroke();
    }

    const text = this.scale >= 0.45;
    // Far out, boxes are plain rectangles: tens of thousands of them still draw in a frame.
    const plain = this.scale < 0.15;
    context.font = "12px ui-monospace, monospace";
    context.textBaseline = "middle";
    this.graph.nodes.forEach((node, index) => {
      if (!visible(node.x, node.y, node.x + node.w, node.y + node.h)) return;
      const [fill, stroke] = COLORS[node.kind] || COLORS.Compute;
      if (plain) {
        // At least 2 screen pixels, so even a fitted graph of 100k nodes shows its shape;
        // selected and highlighted nodes come after, larger, on top.
        if (index === this.selected || this.highlighted.has(index)) return;
        const least = 2 / this.scale;
        context.fillStyle = stroke;
        context.fillRect(node.x, node.y, Math.max(node.w, least), Math.max(node.h, least));
        return;
      }
      context.fillStyle = this.highlighted.has(index) ? "#fff3b0" : fill;
      context.strokeStyle = index === this.selected ? "#d9480f" : stroke;
      context.lineWidth = (index === this.selected ? 3 : 1) / Math.max(this.scale, 0.5);
      const radius = node.kind === "module" ? 8 : 3;
      context.beginPath();
      context.roundRect(node.x, node.y, node.w, node.h, radius);
      context.fill();
      context.stroke();
      if (text) {
        context.fillStyle = "#1d2733";
        context.fillText(node.label, node.x + 10, node.y + node.h * 0.32, node.w - 14);
        context.fillStyle = "#5a6572";
        context.fillText(node.detail, node.x + 10, node.y + node.h * 0.7, node.w - 14);
      }
    });
    if (plain) {
      const least = 8 / this.scale;
      const marks = [...this.highlighted].filter((index) => index !== this.selected);
      if (this.selected >= 0) marks.push(this.selected);
      for (const index of marks) {
        const node = this.graph.nodes[index];
        if (!node) continue;
        context.fillStyle = index === this.selected ? "#d9480f" : "#e6a700";
        const w = Math.max(node.w, least);
        const h = Math.max(node.h, least);
        context.fillRect(node.x + node.w / 2 - w / 2, node.y + node.h / 2 - h / 2, w, h);
      }
    }
    this.frames += 1;
    this.canvas.dataset.frames = String(this.frames);
    if (this.onFirstFrame) {
      const callback = this.onFirstFrame;
      this.onFirstFrame = null;
      callback();
    }
  }

  nodeAt(clientX, clientY) {
    if (!this.graph) return -1;
    const box = this.canvas.getBoundingClientRect();
    const x = (clientX - box.left - this.tx) / this.scale;
    const y = (clientY - box.top - this.ty) / this.scale;
    return this.graph.nodes.findIndex(
      (node) => x >= node.x && x <= node.x + node.w && y >= node.y && y <= node.y + node.h,
    );
  }

  listen() {
    const canvas = this.canvas;
    let drag = null;
    canvas.addEventListener("pointerdown", (event) => {
      drag = { x: event.clientX, y: event.clientY, tx: this.tx, ty: this.ty, moved: false };
      canvas.setPointerCapture(event.pointerId);
    });
    canvas.addEventListener("pointermove", (event) => {
      if (!drag) {
        // The whole label and detail of the node under the pointer, for truncated text.
        const index = this.nodeAt(event.clientX, event.clientY);
        const node = index >= 0 ? this.graph.nodes[index] : null;
        canvas.title = node ? `${node.label}\n${node.detail}` : "";
        return;
      }
      const dx = event.clientX - drag.x;
      const dy = event.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 4) drag.moved = true;
      this.tx = drag.tx + dx;
      this.ty = drag.ty + dy;
      this.request();
    });
    canvas.addEventListener("pointerup", (event) => {
      const click = drag && !drag.moved;
      drag = null;
      if (!click) return;
      const index = this.nodeAt(event.clientX, event.clientY);
      if (index >= 0) this.onNodeClick(this.graph.nodes[index], index);
    });
    canvas.addEventListener(
      "wheel",
      (event) => {
        event.preventDefault();
        const box = canvas.getBoundingClientRect();
        const px = event.clientX - box.left;
        const py = event.clientY - box.top;
        const factor = Math.exp(-event.deltaY * 0.0015);
        const scale = Math.min(4, Math.max(0.0001, this.scale * factor));
        this.tx = px - ((px - this.tx) * scale) / this.scale;
        this.ty = py - ((py - this.ty) * scale) / this.scale;
        this.scale = scale;
        this.request();
      },
      { passive: false },
    );
  }
}
