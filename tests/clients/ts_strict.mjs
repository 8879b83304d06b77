// The official TypeScript MCP SDK client with the strict JSON Schema validator its documentation
// shows (`new AjvJsonSchemaValidator(new Ajv({ strict: true, allErrors: true }))`): a host that
// passes it compiles every advertised output schema when it lists the tools, and refuses the
// whole listing if one does not compile. Lists the tools, then calls each reading tool once
// (its reply checked by that validator). One JSON line per step; tests/test_ts_client.py checks them.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import Ajv from "ajv";

const [command, database, profile, schemas] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command, args: [],
  env: { ...process.env, MEMORY_FILE_PATH: database, MEMORY_LOG_LEVEL: "warning", MEMORY_TOOLS: profile,
         MEMORY_SCHEMAS_DIR: schemas },
});
const validator = new AjvJsonSchemaValidator(new Ajv({ strict: true, allErrors: true, logger: false }));
const client = new Client({ name: "ts-strict", version: "1.0.0" }, { jsonSchemaValidator: validator });
await client.connect(transport);
const out = (step, value) => console.log(JSON.stringify({ step, value }));
const attempt = async (step, run) => {
  try { out(step, await run()); } catch (error) { out(step, { thrown: error.message }); }
};
await attempt("tools", async () => (await client.listTools()).tools.map((t) => t.name));
const reads = profile === "memorymesh"
  ? [["read_graph", {}], ["search_nodes", { query: "a" }], ["open_nodes", { names: ["nobody"] }]]
  : [["read_graph", { view: "summary", timestamps: true }], ["search_nodes", { query: "a" }], ["open_nodes", { names: ["nobody"] }]];
for (const [name, args] of reads) {
  await attempt(name, async () => {
    const r = await client.callTool({ name, arguments: args });
    return r.isError ? { error: r.content[0].text } : Object.keys(r.structuredContent);
  });
}
await client.close();
