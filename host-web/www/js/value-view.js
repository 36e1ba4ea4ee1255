// Pictures of a saved value: a histogram of its finite elements and, for 2-D and image-like
// values, a heatmap of its first slice (diverging colors around zero when it has both signs;
// cells with no finite element are magenta).

export function drawHistogram(canvas, histogram) {
  const context = canvas.getContext("2d");
  const { width, height } = canvas;
  context.clearRect(0, 0, width, height);
  const counts = histogram.counts;
  const top = Math.max(1, ...counts);
  const bar = width / counts.length;
  context.fillStyle = "#5b7db1";
  counts.forEach((count, index) => {
    const h = (count / top) * (height - 14);
    context.fillRect(index * bar + 0.5, height - 14 - h, Math.max(1, bar - 1), h);
  });
  context.fillStyle = "#333";
  context.font = "10px ui-monospace, monospace";
  context.textBaseline = "bottom";
  context.fillText(format(histogram.low), 2, height);
  const high = format(histogram.high);
  context.fillText(high, width - context.measureText(high).width - 2, height);
}

export function drawHeatmap(canvas, heatmap) {
  const { rows, cols, cells } = heatmap;
  const finite = cells.filter((cell) => cell !== null);
  const low = Math.min(...finite);
  const high = Math.max(...finite);
  const diverging = low < 0 && high > 0;
  const span = diverging ? Math.max(-low, high) : high - low || 1;
  const image = new ImageData(cols, rows);
  cells.forEach((cell, index) => {
    let rgb;
    if (cell === null) rgb = [255, 0, 255];
    else if (diverging) {
      const t = Math.min(1, Math.abs(cell) / span);
      rgb = cell < 0 ? mix([255, 255, 255], [49, 99, 181], t) : mix([255, 255, 255], [196, 58, 49], t);
    } else rgb = mix([20, 24, 60], [250, 220, 80], (cell - low) / span);
    image.data.set([...rgb, 255], index * 4);
  });
  // Draw at the grid's size, then scale up without smoothing.
  const scratch = new OffscreenCanvas(cols, rows);
  scratch.getContext("2d").putImageData(image, 0, 0);
  const context = canvas.getContext("2d");
  context.imageSmoothingEnabled = false;
  context.clearRect(0, 0, canvas.width, canvas.height);
  const scale = Math.min(canvas.width / cols, canvas.height / rows);
  context.drawImage(scratch, 0, 0, cols * scale, rows * scale);
  return diverging
    ? `blue below zero, red above, full color at ±${format(span)}`
    : `dark ${format(low)} to bright ${format(high)}`;
}

function mix(a, b, t) {
  return a.map((value, index) => Math.round(value + (b[index] - value) * t));
}

export function format(value) {
  if (value === null || value === undefined) return "–";
  if (Number.isInteger(value) && Math.abs(value) < 1e9) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e5)) return value.toExponential(3);
  return value.toFixed(4);
}
