// A client nobody here wrote: the official TypeScript MCP SDK (what Claude Desktop and the MCP
// Inspector use) drives graph-memory over stdio, validating every structured result against the
// tool's outputSchema. Prints one JSON line per step; tests/test_ts_client.py checks them.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, database] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command, args: [], env: { ...process.env, MEMORY_FILE_PATH: database, MEMORY_LOG_LEVEL: "warning" },
});
const client = new Client({ name: "ts-check", version: "1.0.0" });
await client.connect(transport);
const out = (step, value) => console.log(JSON.stringify({ step, value }));
out("server", client.getServerVersion());
out("tools", (await client.listTools()).tools.map((t) => t.name));
const calls = [
  ["create_entities", { entities: [{ name: "Ada", entityType: "person", observations: ["wrote notes", "İstanbul trip"] },
                                   { name: "Bob", entityType: "person", observations: [] }] }],
  ["create_relations", { relations: [{ from: "Ada", to: "Bob", relationType: "knows" }] }],
  ["create_relations", { relations: [{ from: "Ada", to: "Zed", relationType: "knows" }] }],
  ["add_observations", { observations: [{ entityName: "Bob", contents: ["likes tea"] }] }],
  ["search_nodes", { query: "TEA" }],
  ["search_nodes", { query: "tea bob", mode: "words", limit: 5 }],
  ["open_nodes", { names: ["Ada"] }],
  ["update_observations", { updates: [{ entityName: "Bob", match: "likes tea", replacement: "likes green tea" }] }],
  ["delete_observations", { deletions: [{ entityName: "Ada", observations: ["wrote notes"] }] }],
  ["delete_relations", { relations: [{ from: "Ada", to: "Bob", relationType: "knows" }] }],
  ["delete_entities", { entityNames: ["Bob", "Nobody"] }],
  ["read_graph", {}],
];
for (const [name, args] of calls) {
  const r = await client.callTool({ name, arguments: args });
  out(name, r.isError ? { error: r.content[0].text } : r.structuredContent);
}
const resource = await client.readResource({ uri: "memory://knowledge-graph" });
out("resource", JSON.parse(resource.contents[0].text));
await client.close();
