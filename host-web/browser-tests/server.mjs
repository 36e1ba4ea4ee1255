// A static file server for the viewer page (host-web/www) on a free localhost port: what
// `tlspec view FILE` does, with no server logic of its own.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize, sep } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".wasm": "application/wasm",
  ".tlspec": "application/octet-stream",
};

// `mounts` maps a path prefix (e.g. "/fixtures/") to another folder.
export async function serve(root, mounts = {}) {
  const server = createServer(async (request, response) => {
    let path = decodeURIComponent(new URL(request.url, "http://localhost").pathname);
    let base = root;
    for (const [prefix, folder] of Object.entries(mounts)) {
      if (path.startsWith(prefix)) {
        base = folder;
        path = `/${path.slice(prefix.length)}`;
      }
    }
    const file = normalize(join(base, path.endsWith("/") ? `${path}index.html` : path));
    if (!file.startsWith(normalize(base) + sep)) {
      response.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(file);
      response.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream" });
      response.end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}/` };
}
