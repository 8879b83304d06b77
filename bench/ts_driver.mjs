// The official TypeScript MCP client (@modelcontextprotocol/sdk, what Claude Desktop, VS Code and
// Cursor run) driving the benchmark's schedule: bench/ts_client.py writes a plan (servers to spawn
// over stdio with StdioClientTransport, then timed steps) and reads back one JSON line per step.
//
//   node ts_driver.mjs PLAN.json
//
// Plan: {"servers": {KIND: {command, args, env, cwd}}, "steps": [STEP]}; a STEP is
//   {server, tool, args, repeat?, expectError?, pageLimit?}: `repeat` identical calls timed one by
//   one, or with `pageLimit` one walk through every page (limit + cursor = each reply's nextCursor),
//   timed as a whole. Servers are connected at once (tools listed, so the client validates results
//   against the output schemas as a host does) and stay connected while steps alternate.
// Output lines: {"server": KIND, "connected": {pid, protocol}}, then per step
//   {"i", "ns": [per-call nanoseconds, performance.now()], "entities": [count per call], "pages"?,
//    "rssMb": server VmHWM after the step} or {"i", "error"} (an unexpected tool error) or
//   {"i", "refused": "client", "message"} when the client dropped the connection (its 10 MiB limit
//   on one message, STDIO_DEFAULT_MAX_BUFFER_SIZE): the driver reconnects to a fresh server process
//   for that server's later steps.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { STDIO_DEFAULT_MAX_BUFFER_SIZE } from "@modelcontextprotocol/sdk/shared/stdio.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const TIMEOUT = { timeout: 900_000, maxTotalTimeout: 900_000 };

function peakRssMb(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
    return line ? Number(line.split(/\s+/)[1]) / 1024 : null;
  } catch {
    return null;   // not Linux, or the process is gone
  }
}

async function connect(kind) {
  const s = plan.servers[kind];
  const transport = new StdioClientTransport({
    command: s.command, args: s.args, env: { ...process.env, ...s.env }, cwd: s.cwd ?? undefined, stderr: "inherit",
  });
  const client = new Client({ name: "graph-memory-bench", version: "1.0.0" });
  const conn = { client, transport, clientErrors: [] };
  // After refusing an oversized message the transport goes on reading the rest of it (parse
  // errors): every error is kept, the refusal is recognised among them.
  client.onerror = (error) => { conn.clientErrors.push(String(error?.message ?? error)); };
  await client.connect(transport);
  await client.listTools(undefined, TIMEOUT);
  conn.pid = transport.pid;
  return conn;
}

const conns = {};
for (const kind of Object.keys(plan.servers)) {
  conns[kind] = await connect(kind);
  out({ server: kind, connected: { pid: conns[kind].pid, maxMessageBytes: STDIO_DEFAULT_MAX_BUFFER_SIZE } });
}

const count = (r) => (Array.isArray(r.structuredContent?.entities) ? r.structuredContent.entities.length : null);
const errorText = (r) => (r.content ?? []).map((c) => c.text ?? "").join(" ").slice(0, 400);

async function call(conn, tool, args) {
  return conn.client.callTool({ name: tool, arguments: args }, undefined, TIMEOUT);
}

for (const [i, step] of plan.steps.entries()) {
  const conn = conns[step.server];
  const ns = [], entities = [];
  let pages = 0;
  try {
    for (let k = 0; k < (step.repeat ?? 1); k++) {
      const start = performance.now();
      let n = 0;
      if (step.pageLimit) {
        let cursor;
        do {
          const r = await call(conn, step.tool, { ...step.args, limit: step.pageLimit, ...(cursor ? { cursor } : {}) });
          if (r.isError) throw Object.assign(new Error(errorText(r)), { toolError: true });
          n += count(r) ?? 0;
          pages += 1;
          cursor = r.structuredContent?.nextCursor;
        } while (cursor);
      } else {
        const r = await call(conn, step.tool, step.args);
        if (Boolean(r.isError) !== Boolean(step.expectError)) {
          if (r.isError) throw Object.assign(new Error(errorText(r)), { toolError: true });
          throw Object.assign(new Error(`${step.tool} succeeded where an error was expected`), { toolError: true });
        }
        n = count(r);
      }
      ns.push(Math.round((performance.now() - start) * 1e6));
      entities.push(n);
    }
  } catch (error) {
    if (error.toolError) {
      out({ i, error: error.message });
      continue;
    }
    // A dropped connection: the client refused a message over its buffer limit (ReadBuffer
    // exceeded maximum size) and closed the transport, or the server went away. Reconnect (a
    // fresh server process on the same data) so the later steps still run.
    const message = conn.clientErrors.find((m) => /exceeded maximum size/.test(m))
      ?? conn.clientErrors[0] ?? String(error?.message ?? error);
    out({ i, refused: /exceeded maximum size/.test(message) ? "client" : "connection", message,
          maxMessageBytes: STDIO_DEFAULT_MAX_BUFFER_SIZE });
    await conn.client.close().catch(() => {});
    conns[step.server] = await connect(step.server);
    continue;
  }
  out({ i, ns, entities, ...(step.pageLimit ? { pages } : {}), rssMb: peakRssMb(conn.pid) });
}

for (const conn of Object.values(conns)) {
  await conn.client.close().catch(() => {});
}
