// What the official TypeScript MCP client (@modelcontextprotocol/sdk) spends on one reply by
// itself, timed in-process on captured JSON-RPC lines (bench/client_cost.py writes the plan):
//
//   node ts_client_cost.mjs PLAN.json
//
// Plan: {"sdk": FOLDER (holding node_modules/@modelcontextprotocol/sdk), "repeat": N,
//        "items": [{"line": FILE (one JSON-RPC response, no newline), "schema": OUTPUT_SCHEMA}]}.
// Per item one JSON line, best of N, in ms: `readBufferMs` (the SDK's stdio ReadBuffer fed the
// line in 64 KiB chunks, as Node reads a pipe: it concatenates its whole buffer for every chunk
// and searches it for a newline, so it grows with the square of one message's size; the time
// includes its own decode, JSON.parse and message check of the complete line),
// `decodeMs` (the line's bytes to a string), `jsonParseMs`, `messageSchemaMs` (zod: the
// JSON-RPC message), `resultSchemaMs` (zod: CallToolResult), `outputSchemaMs` (the client's
// compiled ajv check of structuredContent against the tool's outputSchema); `valid`.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const dist = join(plan.sdk, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const load = (path) => import(pathToFileURL(join(dist, path)).href);
const { ReadBuffer } = await load("shared/stdio.js");
const { JSONRPCMessageSchema, CallToolResultSchema } = await load("types.js");
const { AjvJsonSchemaValidator } = await load("validation/ajv-provider.js");
const CHUNK = 65_536;   // what Node's pipe reads deliver at most

function best(step) {
  let min = Infinity, value;
  for (let i = 0; i < (plan.repeat ?? 3); i++) {
    const start = performance.now();
    value = step();
    min = Math.min(min, performance.now() - start);
  }
  return [min, value];
}

for (const item of plan.items) {
  const bytes = Buffer.concat([readFileSync(item.line), Buffer.from("\n")]);
  const [readBufferMs] = best(() => {
    const buffer = new ReadBuffer({ maxBufferSize: bytes.length + 1 });
    let message = null;
    for (let at = 0; at < bytes.length; at += CHUNK) {
      buffer.append(bytes.subarray(at, at + CHUNK));
      message = buffer.readMessage() ?? message;
    }
    return message;
  });
  const [decodeMs, text] = best(() => bytes.toString("utf8", 0, bytes.length - 1));
  const [jsonParseMs, parsed] = best(() => JSON.parse(text));
  const [messageSchemaMs, message] = best(() => JSONRPCMessageSchema.parse(parsed));
  const [resultSchemaMs, result] = best(() => CallToolResultSchema.parse(message.result));
  const validator = new AjvJsonSchemaValidator().getValidator(item.schema);
  const [outputSchemaMs, check] = best(() => validator(result.structuredContent));
  process.stdout.write(JSON.stringify({ readBufferMs, decodeMs, jsonParseMs, messageSchemaMs, resultSchemaMs,
                                        outputSchemaMs, valid: check.valid }) + "\n");
}
