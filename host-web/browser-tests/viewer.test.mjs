// Browser tests of the viewer: playwright-core drives Debian's chromium (no browser download)
// against the static page served from host-web/www. Traces come from the core's own encoder
// (the fixtures example) and from the torchlens Python package; screenshots land in
// out/viewer-screenshots/.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..", "..");
const www = join(root, "host-web", "www");
const fixtures = join(root, "out", "web-fixtures");
const shots = join(root, "out", "viewer-screenshots");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
  assert.equal(result.status, 0, `${command} ${args.join(" ")} failed`);
}

let server;
let context;
let page;
let pageErrors = [];

async function openFile(path) {
  await page.setInputFiles("#file-input", path);
  await page.waitForFunction(() => ["ready", "error"].includes(document.body.dataset.state));
  return page.evaluate(() => document.body.dataset.state);
}

async function nodes() {
  return page.evaluate(() => window.tlViewer.nodes());
}

async function clickNode(label) {
  const position = await page.evaluate((name) => window.tlViewer.locate(name), label);
  assert.ok(position, `no node ${label} in the graph`);
  await page.mouse.click(position.x, position.y);
}

async function nodeCountChange(before) {
  await page.waitForFunction((count) => Number(document.getElementById("graph").dataset.nodes) !== count, before);
  return Number(await page.getAttribute("#graph", "data-nodes"));
}

async function shot(name) {
  await page.screenshot({ path: join(shots, `${name}.png`) });
}

describe("the browser viewer", () => {
  before(async () => {
    assert.ok(existsSync(join(www, "pkg", "torchlens_web_bg.wasm")), "build the viewer first: scripts/build-web.sh");
    rmSync(shots, { recursive: true, force: true });
    mkdirSync(shots, { recursive: true });
    // The traces the tests open: the core's encoder writes the demo, the 100k-op and the
    // hostile files; the Python package writes a real torch trace.
    run("cargo", ["run", "--quiet", "--release", "-p", "torchlens-web", "--example", "fixtures", "--", fixtures]);
    run(join(root, ".venv", "bin", "python"), [
      join(here, "write_torch_trace.py"), join(fixtures, "torch.tlspec"), join(fixtures, "torch-backward.tlspec"),
    ]);
    server = await serve(www, { "/fixtures/": fixtures });
    const profile = mkdtempSync(join(tmpdir(), "tl-viewer-profile-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
      ],
    });
    context.profile = profile;
    page = await context.newPage();
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    await page.goto(server.url);
    await page.waitForFunction(() => document.body.dataset.state === "empty");
  });

  after(async () => {
    if (context) await context.close();
    if (context && context.profile) rmSync(context.profile, { recursive: true, force: true });
    if (server && server.server) server.server.close();
  });

  it("opens a trace, draws the graph by module, expands a module, pans and zooms", async () => {
    assert.equal(await openFile(join(fixtures, "demo.tlspec")), "ready");
    assert.match(await page.textContent("#check-status"), /header, body and payload table valid/);
    assert.equal(await page.textContent("#capture-status"), "capture complete");
    const overview = await nodes();
    const boxes = overview.filter((node) => node.kind === "module").map((node) => node.label);
    assert.ok(boxes.includes("cell:2"), `module boxes: ${boxes}`);
    await shot("01-overview");

    const count = overview.length;
    await clickNode("cell:2");
    const opened = await nodeCountChange(count);
    assert.ok(opened > count);
    const labels = (await nodes()).map((node) => node.label);
    assert.ok(labels.includes("cell.linear:2") && labels.includes("cell:1") && !labels.includes("cell:2"));
    await shot("02-expanded-cell-2");

    const view = await page.evaluate(() => window.tlViewer.view());
    const box = await page.locator("#graph").boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -400);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width / 2 + 120, box.y + box.height / 2 + 60, { steps: 5 });
    await page.mouse.up();
    await page.waitForTimeout(50);
    const moved = await page.evaluate(() => window.tlViewer.view());
    assert.ok(moved.scale > view.scale, "the wheel zooms in");
    assert.notEqual(moved.tx, view.tx, "dragging pans");
  });

  it("selects an op and shows its links, values, histogram and heatmap", async () => {
    const tanh = (await nodes()).find((node) => node.kind === "Compute" && node.detail.startsWith("tanh"));
    assert.ok(tanh, "an opened cell shows its tanh op");
    await clickNode(tanh.label);
    await page.waitForSelector("#histogram");
    assert.equal(await page.textContent("#op-label"), tanh.label);
    const panel = await page.textContent("#op-panel");
    assert.match(panel, /function\s*tanh/);
    assert.match(panel, /module\s*cell:2/);
    assert.match(panel, /elements\s*32/);
    assert.ok(await page.isVisible("#heatmap"), "a 2-D value gets a heatmap");
    const drawn = await page.$eval("#histogram", (canvas) => {
      const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      return data.some((value, index) => index % 4 === 3 && value > 0);
    });
    assert.ok(drawn, "the histogram has pixels");
    await page.locator("#heatmap").scrollIntoViewIfNeeded();
    await shot("03-op-values");

    const parent = await page.locator("#op-panel .links").first().locator("button.op-link").first();
    const parentLabel = await parent.textContent();
    await parent.click();
    await page.waitForFunction((label) => document.getElementById("op-label")?.textContent === label, parentLabel);
    assert.equal(await page.textContent(".row.selected span:nth-child(2)"), parentLabel, "the table follows");
  });

  it("searches with a selector expression and reports a bad one", async () => {
    await page.fill("#search-input", "func:tanh & in_module:cell");
    await page.press("#search-input", "Enter");
    await page.waitForSelector("#search-count");
    assert.equal(await page.textContent("#search-count"), "3 ops match");
    await shot("04-search");
    const first = page.locator("#search-result button.op-link").first();
    const label = await first.textContent();
    await first.click();
    await page.waitForFunction((name) => document.getElementById("op-label")?.textContent === name, label);

    await page.fill("#search-input", "func:(");
    await page.press("#search-input", "Enter");
    await page.waitForFunction(() => document.getElementById("search-error").textContent.length > 0);
    assert.match(await page.textContent("#search-error"), /^\[selector_/);
  });

  // Influence search on three small graphs the core's encoder writes (demo_model::influence_graphs);
  // the expected ops are worked out by hand from the drawings:
  //   diamond:       input_1 → relu_1_2 → (sigmoid_1_3, tanh_1_4) → add_1_5 → add_2_6(·, input_1) → output_1
  //   branching:     input_1 → relu_1_3 → sigmoid_1_4 → output_1; input_1, constant_1 → mul_1_5 → exp_1_6 → output_2
  //   reused_module: input_1 → linear_1_2:1 (fc:1) → relu_1_3 → linear_1_2:2 (fc:2) → add_1_5(·, sigmoid_1_4(input_1)) → output_1
  const influence = {
    diamond: [
      ["downstream_of(func:sigmoid)", ["add_1_5", "add_2_6", "output_1"]],
      ["upstream_of(func:tanh)", ["input_1", "relu_1_2"]],
      ["downstream_of(func:sigmoid) & upstream_of(label:output_1)", ["add_1_5", "add_2_6"]],
      ["upstream_of(label:input_1)", []],
    ],
    branching: [
      ["downstream_of(func:relu)", ["sigmoid_1_4", "output_1"]],
      ["upstream_of(func:exp)", ["input_1", "constant_1", "mul_1_5"]],
      ["upstream_of(label:output_1) & ~upstream_of(label:output_2)", ["relu_1_3", "sigmoid_1_4"]],
    ],
    reused_module: [
      ["downstream_of(in_module:fc:1)", ["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"]],
      ["upstream_of(label:linear_1_2:2)", ["input_1", "linear_1_2:1", "relu_1_3"]],
      ["downstream_of(module:fc)", ["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"]],
      ["upstream_of(func:sigmoid)", ["input_1"]],
    ],
  };

  it("searches by influence: the ops a chosen op reaches and the ops that reach it", async () => {
    for (const [graph, cases] of Object.entries(influence)) {
      assert.equal(await openFile(join(fixtures, "influence", `${graph}.tlspec`)), "ready", graph);
      for (const [expression, expected] of cases) {
        // Clear first, so the count below is this search's and not the previous one's.
        await page.fill("#search-input", "");
        await page.press("#search-input", "Enter");
        await page.waitForFunction(() => !document.getElementById("search-count"));
        await page.fill("#search-input", expression);
        await page.press("#search-input", "Enter");
        await page.waitForSelector("#search-count");
        const count = expected.length === 1 ? "1 op matches" : `${expected.length} ops match`;
        assert.equal(await page.textContent("#search-count"), count, `${graph}: ${expression}`);
        const listed = await page.locator("#search-result button.op-link").allTextContents();
        assert.deepEqual([...listed].sort(), [...expected].sort(), `${graph}: ${expression}`);
        assert.equal(await page.textContent("#search-error"), "");
      }
    }
    await shot("04b-influence-search");
    await page.fill("#search-input", "upstream_of(func:relu");
    await page.press("#search-input", "Enter");
    await page.waitForFunction(() => document.getElementById("search-error").textContent.length > 0);
    assert.match(await page.textContent("#search-error"), /^\[selector_expression_syntax\]/);
  });

  it("shows a clear error for broken and hostile files, and keeps working", async () => {
    const expected = JSON.parse(readFileSync(join(fixtures, "hostile", "expected.json"), "utf8"));
    for (const [name, code] of Object.entries(expected)) {
      const started = Date.now();
      assert.equal(await openFile(join(fixtures, "hostile", name)), "error", name);
      assert.ok(Date.now() - started < 5000, `${name} answered quickly`);
      assert.ok(await page.isVisible("#error"));
      const shown = await page.textContent("#error-code");
      assert.ok(shown.startsWith(code), `${name}: ${shown}`);
      assert.match(await page.textContent("#error-remedy"), /What to do: \S/);
      assert.equal(await page.evaluate(() => 1 + 1), 2, "the page still answers");
    }
    await shot("05-hostile-file");
    assert.equal(await openFile(join(fixtures, "demo.tlspec")), "ready", "a good file opens after bad ones");
    assert.ok(await page.isHidden("#error"));
  });

  it("says when a capture stopped early or may be incomplete", async () => {
    assert.equal(await openFile(join(fixtures, "stopped.tlspec")), "ready");
    assert.equal(
      await page.textContent("#capture-status"),
      "capture may be incomplete: capture stopped before the model returned",
    );
    assert.match(await page.textContent("#status"), /stopped early: stop_after reached \(at \S+\)/);
    await shot("06-stopped-capture");
  });

  it("opens a trace written by the Python package and shows an image-like value", async () => {
    assert.equal(await openFile(join(fixtures, "torch.tlspec")), "ready");
    // The package's file ends with its payload CRC-32 table, which is no saved value.
    const written = JSON.parse(readFileSync(join(fixtures, "torch.tlspec.json"), "utf8"));
    assert.ok(written.crc_table, "the Python package writes the payload CRC-32 table");
    assert.match(await page.textContent("#status"), new RegExp(`· ${written.saved} saved values`));
    const boxes = (await nodes()).filter((node) => node.kind === "module").map((node) => node.label);
    assert.ok(boxes.includes("features:1"), `module boxes: ${boxes}`);
    const count = (await nodes()).length;
    await clickNode("features:1");
    await nodeCountChange(count);
    // The Sequential opens into one box per layer; the convolution is inside features.0.
    await clickNode("features.0:1");
    await page.waitForFunction(() =>
      window.tlViewer.nodes().some((node) => node.kind !== "module" && node.detail.startsWith("conv2d")));
    const conv = (await nodes()).find((node) => node.detail.startsWith("conv2d"));
    assert.ok(conv, "opening features shows the convolution");
    await clickNode(conv.label);
    await page.waitForSelector("#heatmap");
    const panel = await page.textContent("#op-panel");
    assert.match(panel, /heatmap \[0, 0, :, :\] \(16×16\)/);
    assert.match(panel, /source\s*\S+\.py:\d+/, "torch records the source line");
    await page.locator("#heatmap").scrollIntoViewIfNeeded();
    await shot("07-torch-trace");
  });

  it("shows a torch trace's backward pass and draws its backward graph", async () => {
    const expected = JSON.parse(readFileSync(join(fixtures, "torch-backward.tlspec.json"), "utf8"));
    assert.equal(await openFile(join(fixtures, "torch-backward.tlspec")), "ready");
    const status = await page.textContent("#backward-status");
    assert.match(status, new RegExp(`backward pass: 1 pass · ${expected.labels.length} grad_fns`));
    assert.match(status, new RegExp(`${expected.saved_grads} saved gradients`));
    assert.equal(await page.isVisible("#toggle-backward"), true);
    const forward = (await nodes()).length;
    await page.click("#toggle-backward");
    await page.waitForFunction(() => document.getElementById("graph-info").textContent.startsWith("backward graph"));
    const drawn = await nodes();
    assert.deepEqual(drawn.map((node) => node.label), expected.labels, "one node per grad_fn, in order");
    const labels = drawn.map((node) => node.label);
    const edges = (await page.evaluate(() => window.tlViewer.edges())).map(([a, b]) => `${labels[a]}>${labels[b]}`);
    assert.deepEqual(edges.sort(), expected.edges.map(([a, b]) => `${a}>${b}`).sort(), "one edge per gradient");
    assert.ok(drawn.some((node) => node.detail.startsWith("AddmmBackward0")), "autograd classes are shown");
    await shot("10-backward-graph");
    // Clicking a grad_fn linked to a forward op opens that op.
    const linked = drawn.find((node) => node.detail.startsWith("ReluBackward0"));
    await clickNode(linked.label);
    await page.waitForFunction(() => /relu/.test(document.getElementById("op-panel").textContent));
    await page.click("#toggle-backward");
    await page.waitForFunction(() => !document.getElementById("graph-info").textContent.startsWith("backward graph"));
    assert.equal((await nodes()).length, forward);
    // A file without a backward pass has no such button.
    assert.equal(await openFile(join(fixtures, "torch.tlspec")), "ready");
    assert.equal(await page.isVisible("#toggle-backward"), false);
  });

  it("opens a 100k-op trace quickly and stays usable", async () => {
    const started = Date.now();
    assert.equal(await openFile(join(fixtures, "large.tlspec")), "ready");
    const wall = Date.now() - started;
    const firstRender = Number(await page.evaluate(() => document.body.dataset.firstRenderMs));
    const ops = await page.evaluate(() => window.tlViewer.state.opCount);
    assert.ok(ops >= 100000, `${ops} ops`);
    writeFileSync(join(shots, "first-render.json"), JSON.stringify({ ops, firstRenderMs: firstRender, wallMs: wall }, null, 2));
    console.log(`# time to first render of a ${ops}-op trace: ${firstRender.toFixed(0)} ms in the page (${wall} ms wall)`);
    assert.ok(firstRender < 2000, `first render took ${firstRender} ms`);
    await shot("08-large-trace");

    // The table is virtualised: the last row comes on demand.
    await page.$eval(".table-viewport", (element) => { element.scrollTop = element.scrollHeight; });
    await page.waitForFunction((last) => {
      const row = document.querySelector(`.row[data-op="${last}"] span:nth-child(2)`);
      return row && row.textContent !== "…";
    }, ops - 1);
    const count = (await nodes()).length;
    await clickNode("block:17");
    const opened = await nodeCountChange(count);
    assert.equal(opened, count + 4);

    // Search, pick a match inside a collapsed call, and open its modules to show it.
    await page.fill("#search-input", "func:relu & in_module:block:500");
    await page.press("#search-input", "Enter");
    await page.waitForFunction(() => document.getElementById("search-count")?.textContent === "1 op matches");
    const match = page.locator("#search-result button.op-link").first();
    const label = await match.textContent();
    await match.click();
    await page.waitForFunction((name) => document.getElementById("op-label")?.textContent === name, label);
    await page.click("text=Show in graph");
    assert.equal(await nodeCountChange(opened), opened + 4);
    assert.ok(await page.evaluate((name) => window.tlViewer.locate(name) !== null, label));
    await shot("09-large-revealed");
  });

  it("shows every op of the 100k-op trace on request", async () => {
    const started = Date.now();
    await page.click("#toggle-full");
    await page.waitForFunction(() => Number(document.getElementById("graph").dataset.nodes) >= 100000, null, { timeout: 60000 });
    console.log(`# every op of the 100k-op trace laid out and drawn in ${Date.now() - started} ms`);
    await page.click("#fit");
    await shot("10-large-every-op");
    await page.click("#collapse-all");
    await page.waitForFunction(() => Number(document.getElementById("graph").dataset.nodes) < 100000);
  });

  it("opens a file dropped on the page", async () => {
    const bytes = Array.from(readFileSync(join(fixtures, "demo.tlspec")));
    const drop = await page.evaluateHandle((data) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([new Uint8Array(data)], "dropped.tlspec"));
      return transfer;
    }, bytes);
    await page.dispatchEvent("body", "dragover", { dataTransfer: drop });
    await page.dispatchEvent("body", "drop", { dataTransfer: drop });
    await page.waitForFunction(() => document.body.dataset.state === "ready"
      && document.getElementById("file-name").textContent === "dropped.tlspec");
    assert.equal(await page.evaluate(() => window.tlViewer.state.opCount), 14);
  });

  it("opens a file named in the address (?file=)", async () => {
    const other = await context.newPage();
    other.on("pageerror", (error) => pageErrors.push(String(error)));
    await other.goto(`${server.url}?file=/fixtures/demo.tlspec`);
    await other.waitForFunction(() => document.body.dataset.state === "ready");
    assert.equal(await other.textContent("#file-name"), "demo.tlspec");
    // Cold: a fresh page that loads the core and then the 100k-op trace.
    await other.goto(`${server.url}?file=/fixtures/large.tlspec`);
    await other.waitForFunction(() => document.body.dataset.state === "ready");
    const cold = Number(await other.evaluate(() => document.body.dataset.sincePageLoadMs));
    console.log(`# 100k-op trace from page load (core fetched and compiled, file fetched) to first render: ${cold.toFixed(0)} ms`);
    const record = JSON.parse(readFileSync(join(shots, "first-render.json"), "utf8"));
    writeFileSync(join(shots, "first-render.json"), JSON.stringify({ ...record, coldFromPageLoadMs: cold }, null, 2));
    await other.close();
  });

  it("stops an open that runs past its deadline and keeps the page working", async () => {
    const other = await context.newPage();
    other.on("pageerror", (error) => pageErrors.push(String(error)));
    // Decoding and laying out 100k ops takes far longer than 5 ms: the watchdog must fire.
    await other.goto(`${server.url}?open-deadline-ms=5`);
    await other.waitForFunction(() => document.body.dataset.state === "empty");
    await other.setInputFiles("#file-input", join(fixtures, "large.tlspec"));
    await other.waitForFunction(() => document.body.dataset.state === "error");
    assert.equal(await other.textContent("#error-code"), "viewer_timeout");
    assert.equal(await other.evaluate(() => 1 + 1), 2, "the page still answers");
    await other.screenshot({ path: join(shots, "11-deadline.png") });
    await other.close();
  });

  it("raised no page errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});
