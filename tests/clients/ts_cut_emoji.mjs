// The official TypeScript MCP SDK client stores a string cut in the middle of an emoji
// ("hi 😀".slice(0, 4): JavaScript sends the lone half as "\ud83d"), over stdio or streamable HTTP,
// then reads the graph back. Prints one JSON line per step; tests/test_ts_client.py checks them.
//   node ts_cut_emoji.mjs stdio COMMAND DATABASE    |    node ts_cut_emoji.mjs http URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, third] = process.argv.slice(2);
const transport = mode === "stdio"
  ? new StdioClientTransport({ command: target, args: [],
                               env: { ...process.env, MEMORY_FILE_PATH: third, MEMORY_LOG_LEVEL: "warning" } })
  : new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers: { Authorization: `Bearer ${third}` } } });
const client = new Client({ name: "ts-cut-emoji", version: "1.0.0" });
await client.connect(transport);
const out = (step, value) => console.log(JSON.stringify({ step, value }));
const cut = "hi 😀".slice(0, 4);
const started = Date.now();
const created = await client.callTool({ name: "create_entities", arguments: { entities: [
  { name: "Ada", entityType: "person", observations: [cut, "whole 😀"] }] } }, undefined, { timeout: 20000 });
out("create_entities", created.isError ? { error: created.content[0].text } : created.structuredContent);
out("milliseconds", Date.now() - started);
const graph = await client.callTool({ name: "read_graph", arguments: {} });
out("read_graph", graph.structuredContent);
await client.close();
