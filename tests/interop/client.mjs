// An MCP client on the official TypeScript SDK (@modelcontextprotocol/sdk), driven by tests/interop_clients.rs.
//
// Usage: node client.mjs NODE_MODULES stdio NONCE DIR TOOLGATE CONFIG
//        node client.mjs NODE_MODULES http  NONCE DIR URL
//
// NODE_MODULES is where .ci/interop-deps installed the SDK (this file is not next to it). It
// connects to toolgate (which fronts server-everything, filesystem, memory and time), does one
// thing per step, and prints one JSON line per step to stdout: {"step": NAME, ...what it
// observed} or {"step": NAME, "error": TEXT}. A failed step does not stop the later ones. The
// test judges the lines; this script decides nothing.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, transportKind, nonce, workdir, ...target] = process.argv.slice(2);
const sdk = (path) => import(pathToFileURL(join(nodeModules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { CreateMessageRequestSchema, ElicitRequestSchema, LoggingMessageNotificationSchema } = await sdk("types.js");

const SERVERS = ["everything", "filesystem", "memory", "time"];
const emit = (step, observed = {}) => process.stdout.write(JSON.stringify({ step, ...observed }) + "\n");
const texts = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const transport =
    transportKind === "stdio"
        ? new StdioClientTransport({ command: target[0], args: ["--config", target[1], "serve"], stderr: "inherit" })
        : new StreamableHTTPClientTransport(new URL(target[0]));

// The SDK keeps the negotiated version to itself; it hands it to the transport, so listen there.
let protocolVersion = null;
const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (version) => {
    protocolVersion = version;
    setProtocolVersion?.(version);
};

const sampled = [];
const elicited = [];
const logs = [];
const client = new Client(
    { name: "toolgate-interop-ts", version: "0" },
    { capabilities: { sampling: {}, elicitation: { form: {} } } },
);
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    sampled.push(request.params);
    return {
        role: "assistant",
        content: { type: "text", text: `sampled answer ${nonce}` },
        model: "interop-model",
        stopReason: "endTurn",
    };
});
client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicited.push(request.params);
    return { action: "accept", content: { name: `Ada ${nonce}`, check: true } };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, async (notification) => {
    logs.push(notification.params);
});

const options = { timeout: 60_000 };
const call = (name, args, extra = {}) => client.callTool({ name, arguments: args }, undefined, { ...options, ...extra });

await client.connect(transport);
// Progress as it arrives, before the SDK handles it: the SDK runs notification handlers a
// microtask later but answers at once, so a last progress read in the same chunk as the
// result never reaches `onprogress` (typescript-sdk#2580). The wire shows what toolgate sent.
const wireProgress = [];
const onmessage = transport.onmessage;
transport.onmessage = (message, extra) => {
    if (message.method === "notifications/progress") {
        wireProgress.push({ progress: message.params.progress, total: message.params.total });
    }
    onmessage?.(message, extra);
};
emit("connect", {
    protocol_version: protocolVersion,
    server: client.getServerVersion()?.name,
    capabilities: client.getServerCapabilities(),
});

const steps = [
    ["tools/list", async () => {
        // toolgate starts its upstreams in the background and announces each one's tools with
        // tools/list_changed; poll until all four are there (or 60 s).
        let names = [];
        const deadline = Date.now() + 60_000;
        while (Date.now() < deadline) {
            names = (await client.listTools(undefined, options)).tools.map((t) => t.name);
            if (SERVERS.every((s) => names.some((n) => n.startsWith(`${s}__`)))) break;
            await sleep(200);
        }
        return { tools: names };
    }],
    ["call everything", async () => {
        const result = await call("everything__echo", { message: `hello ${nonce}` });
        return { texts: texts(result), is_error: Boolean(result.isError) };
    }],
    ["call filesystem", async () => {
        const result = await call("filesystem__read_text_file", { path: `${workdir}/note.txt` });
        return { texts: texts(result), is_error: Boolean(result.isError) };
    }],
    ["call memory", async () => {
        await call("memory__create_entities", {
            entities: [{ name: `entity-${nonce}`, entityType: "test", observations: ["seen"] }],
        });
        const result = await call("memory__read_graph", {});
        return { texts: texts(result), is_error: Boolean(result.isError) };
    }],
    ["call time", async () => {
        const result = await call("time__get_current_time", { timezone: "UTC" });
        return { texts: texts(result), is_error: Boolean(result.isError) };
    }],
    ["progress", async () => {
        const seen = [];
        const result = await call(
            "everything__trigger-long-running-operation",
            { duration: 0.6, steps: 3 },
            { onprogress: (p) => seen.push({ progress: p.progress, total: p.total }) },
        );
        // Everything that arrived before the result was read is in `wireProgress` by now.
        const wire = wireProgress.splice(0);
        return { progress: seen, wire, texts: texts(result), is_error: Boolean(result.isError) };
    }],
    ["resource", async () => {
        const uris = (await client.listResources(undefined, options)).resources.map((r) => r.uri);
        const wanted = uris.find((u) => u.endsWith("/architecture.md"));
        const read = await client.readResource({ uri: wanted }, options);
        return { uris, read: wanted, contents: read.contents };
    }],
    ["prompt", async () => {
        const prompts = (await client.listPrompts(undefined, options)).prompts.map((p) => p.name);
        const got = await client.getPrompt({ name: "everything__args-prompt", arguments: { city: `City ${nonce}` } }, options);
        return { prompts, messages: got.messages };
    }],
    ["sampling", async () => {
        const result = await call("everything__trigger-sampling-request", { prompt: `ask ${nonce}` });
        return { asked: sampled, texts: texts(result), is_error: Boolean(result.isError) };
    }],
    ["elicitation", async () => {
        const result = await call("everything__trigger-elicitation-request", {});
        return { asked: elicited, texts: texts(result), is_error: Boolean(result.isError) };
    }],
    ["logging", async () => {
        await client.setLoggingLevel("debug", options);
        const result = await call("everything__toggle-simulated-logging", {});
        // server-everything sends the first message right away, then one every 5 s.
        const deadline = Date.now() + 10_000;
        while (logs.length === 0 && Date.now() < deadline) await sleep(50);
        await call("everything__toggle-simulated-logging", {});
        return { logs, texts: texts(result) };
    }],
];
for (const [name, body] of steps) {
    try {
        emit(name, await body());
    } catch (error) {
        emit(name, { error: `${error?.name}: ${error?.message}`, trace: String(error?.stack).split("\n").slice(0, 4).join("\n") });
    }
}
await client.close();
emit("done");
