// The official TypeScript MCP SDK client (what Node hosts run) reads a memory with the reading
// tools' options: summary view, timestamps, since, and pages until nextCursor runs out, with
// every structured result validated against our outputSchema by the SDK itself; a reply over
// MEMORY_MAX_REPLY_BYTES comes back as a tool error, not a dropped connection. One JSON line per
// step; tests/test_ts_client.py checks them.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, database] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command, args: [],
  env: { ...process.env, MEMORY_FILE_PATH: database, MEMORY_LOG_LEVEL: "warning", MEMORY_MAX_REPLY_BYTES: "20000" },
});
const client = new Client({ name: "ts-reading", version: "1.0.0" });
await client.connect(transport);
const out = (step, value) => console.log(JSON.stringify({ step, value }));
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return r.isError ? { error: r.content[0].text } : r.structuredContent;
};
const entities = Array.from({ length: 60 }, (_, i) => ({
  name: `E${i}`, entityType: "thing", observations: [`fact ${i} about tea and more words to fill the page`],
}));
await call("create_entities", { entities });
await call("create_relations", { relations: entities.slice(1).map((e, i) => ({ from: e.name, to: `E${i}`, relationType: "after" })) });
out("too_large", await call("read_graph", {}));
out("summary", await call("read_graph", { view: "summary", limit: 2 }));
out("timestamps", await call("open_nodes", { names: ["E1"], timestamps: true }));
out("since", await call("search_nodes", { query: "tea", since: "2000-01-01", limit: 3, view: "summary" }));
const pages = [];
let reply = await call("read_graph", { limit: 25 });
pages.push(reply);
while (reply.nextCursor) {
  reply = await call("read_graph", { limit: 25, cursor: reply.nextCursor });
  pages.push(reply);
}
out("pages", { count: pages.length, entities: pages.flatMap((p) => p.entities.map((e) => e.name)),
               relations: pages.reduce((n, p) => n + p.relations.length, 0), errors: pages.filter((p) => p.error) });
out("bad_cursor", await call("read_graph", { limit: 25, cursor: "garbage" }));
await client.close();
