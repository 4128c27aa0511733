// `tools/call` through toolgate from the official TypeScript SDK's stdio client, which Node
// spawns with a socket pair for each of stdin and stdout (not pipes): what clients built on
// Node see. Prints one Markdown table. Its first row is the same echo_server called directly
// by the same client; it is no floor: echo_server takes stdin and stdout with rmcp's
// `stdio_pipes`, which reads sockets on tokio's blocking threads (toolgate gives its
// upstream pipes), so a gateway can be faster than it.
// With HTTP=1, the same client's streamable HTTP transport too: each gateway as
// `serve --http` (its upstream still echo_server over stdio), and echo_server serving HTTP
// itself (rmcp's server, no gateway), each added p50 and ratio still against the first row.
//
// Usage: node scripts/ts-sdk-calls.mjs NODE_MODULES ECHO_SERVER TOOLGATE... 
//   NODE_MODULES: where .ci/interop-deps installed the SDK (target/interop/node/node_modules)
//   ECHO_SERVER:  target/release/examples/echo_server
//   TOOLGATE:     one or more gateway binaries, measured in turn (interleaved rounds)
// Env: ROUNDS (default 3), SEQUENTIAL (calls per round, default 2000), CONCURRENT (calls per
// round from 16 callers, default 10000), HTTP (default unset).
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, echoServer, ...gateways] = process.argv.slice(2);
if (!nodeModules || !echoServer || gateways.length === 0) {
    console.error("usage: node scripts/ts-sdk-calls.mjs NODE_MODULES ECHO_SERVER TOOLGATE...");
    process.exit(2);
}
const sdk = (path) => import(pathToFileURL(join(nodeModules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SEQUENTIAL = Number(process.env.SEQUENTIAL ?? 2000);
const CONCURRENT = Number(process.env.CONCURRENT ?? 10000);
const CALLERS = 16;
const TEXT = "hello world!";

const dir = mkdtempSync(join(tmpdir(), "ts-sdk-calls-"));
const config = join(dir, "servers.toml");
writeFileSync(config, `[servers.s0]\ncommand = ${JSON.stringify(echoServer)}\n`);

async function connect(command, args) {
    const client = new Client({ name: "ts-sdk-calls", version: "0" });
    await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
    return client;
}

// Starts `command` (which prints `NAME: listening on URL` to stderr) and connects to URL
// over streamable HTTP; the process is killed with the client.
async function connectHttp(name, command, args, env) {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
    const url = await new Promise((resolve, reject) => {
        let seen = "";
        child.stderr.on("data", (chunk) => {
            seen += chunk;
            const found = seen.match(new RegExp(`^${name}: listening on (\\S+)$`, "m"));
            if (found) resolve(found[1]);
        });
        child.on("exit", (code) => reject(new Error(`${command} exited (${code}) before listening: ${seen}`)));
    });
    const client = new Client({ name: "ts-sdk-calls", version: "0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    const close = client.close.bind(client);
    client.close = async () => {
        await close();
        child.kill();
    };
    return client;
}

async function call(client, name) {
    const result = await client.callTool({ name, arguments: { text: TEXT } });
    if (result.isError || result.content[0]?.text !== TEXT) {
        throw new Error(`${name} answered ${JSON.stringify(result)}`);
    }
}

const paths = [
    { label: "direct: TS SDK → echo_server", command: echoServer, args: [], tool: "echo" },
    ...gateways.map((gateway) => ({
        label: `TS SDK → ${gateway} → echo_server`,
        command: gateway,
        args: ["--config", config, "serve"],
        tool: "s0__echo",
    })),
];
if (process.env.HTTP) {
    paths.push(
        ...gateways.map((gateway) => ({
            label: `TS SDK → ${gateway} (HTTP) → echo_server`,
            http: ["toolgate", gateway, ["--config", config, "serve", "--http", "127.0.0.1:0"], {}],
            tool: "s0__echo",
        })),
        {
            label: "direct: TS SDK → echo_server (HTTP, rmcp's server)",
            http: ["echo-server", echoServer, [], { ECHO_HTTP_ADDR: "127.0.0.1:0" }],
            tool: "echo",
        },
    );
}
for (const path of paths) {
    path.client = path.http ? await connectHttp(...path.http) : await connect(path.command, path.args);
    path.samples = [];
    path.concurrentMs = 0;
    path.clientCpuUs = 0;
    for (let i = 0; i < 200; i++) await call(path.client, path.tool);
}
for (let round = 0; round < ROUNDS; round++) {
    for (const path of paths) {
        for (let i = 0; i < SEQUENTIAL; i++) {
            const start = process.hrtime.bigint();
            await call(path.client, path.tool);
            path.samples.push(Number(process.hrtime.bigint() - start) / 1000);
        }
        let next = 0;
        const cpu = process.cpuUsage();
        const start = process.hrtime.bigint();
        await Promise.all(
            Array.from({ length: CALLERS }, async () => {
                while (next++ < CONCURRENT) await call(path.client, path.tool);
            }),
        );
        path.concurrentMs += Number(process.hrtime.bigint() - start) / 1e6;
        const used = process.cpuUsage(cpu);
        path.clientCpuUs += used.user + used.system;
    }
}
const p = (samples, q) => samples.slice().sort((a, b) => a - b)[Math.floor((samples.length - 1) * q)];
const direct = paths[0];
const rate = (path) => (CONCURRENT * ROUNDS) / (path.concurrentMs / 1000);
console.log(
    `| path | p50 µs | p99 µs | added p50 µs | calls/s (${CALLERS} callers) | × direct | client (Node) CPU µs/call (${CALLERS} callers) |`,
);
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const path of paths) {
    const added = path === direct ? "–" : `${(p(path.samples, 0.5) - p(direct.samples, 0.5)).toFixed(0)}`;
    console.log(
        `| ${path.label} | ${p(path.samples, 0.5).toFixed(0)} | ${p(path.samples, 0.99).toFixed(0)} | ${added} | ${rate(path).toFixed(0)} | ${(rate(path) / rate(direct)).toFixed(2)} | ${(path.clientCpuUs / (CONCURRENT * ROUNDS)).toFixed(1)} |`,
    );
}
for (const path of paths) await path.client.close();
