// One client scenario of the official conformance suite, run through toolgate.
//
// The suite starts a test server and runs `client-driver <serverUrl>` with
// MCP_CONFORMANCE_SCENARIO and (for some scenarios) MCP_CONFORMANCE_CONTEXT set. This writes a
// servers.toml with that URL as server `remote` (an `auth` table for the auth/* scenarios,
// from the context), signs in with `toolgate login remote --no-browser` where the scenario
// needs it (following the test authorization server's auto-approving redirect to toolgate's
// loopback listener, as a browser would), then serves toolgate over stdio to the TypeScript
// SDK's client, lists the tools and calls each one. A call refused with
// UPSTREAM_AUTH_REQUIRED (a step-up) gets one more login and one retry.
//
// Env: TOOLGATE_BIN (default target/debug/toolgate), CONFORMANCE_NODE_MODULES.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import readline from 'node:readline';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const modules = process.env.CONFORMANCE_NODE_MODULES ?? join(root, 'target/conformance-node/node_modules');
const sdk = (path) => import(pathToFileURL(join(modules, '@modelcontextprotocol/sdk/dist/esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { ElicitRequestSchema } = await sdk('types.js');

const toolgate = process.env.TOOLGATE_BIN ?? join(root, 'target/debug/toolgate');
const serverUrl = process.argv[2];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
// The client metadata document URL the suite's CIMD scenario expects a client to own.
const CLIMD_URL = 'https://conformance-test.local/client-metadata.json';
const LOGIN_TIMEOUT_SECS = 20;
const MAX_RELOGINS = 1;

const log = (...args) => console.error('client-driver:', ...args);
if (!serverUrl) {
  log('usage: client-driver <serverUrl>');
  process.exit(64);
}

const work = mkdtempSync(join(tmpdir(), 'toolgate-conformance-'));
const env = { ...process.env, TOOLGATE_GATEWAY__TOKEN_DIR: join(work, 'tokens') };
const config = join(work, 'servers.toml');
const toml = (value) => JSON.stringify(value);

function authTable() {
  if (!scenario.startsWith('auth/')) return '';
  if (scenario.startsWith('auth/client-credentials')) {
    const lines = ['[servers.remote.auth]', 'type = "client_credentials"', `client_id = ${toml(context.client_id)}`];
    if (context.client_secret) lines.push(`client_secret = ${toml(context.client_secret)}`);
    if (context.private_key_pem) {
      lines.push(`private_key = ${toml(context.private_key_pem)}`);
      lines.push(`signing_algorithm = ${toml(context.signing_algorithm ?? 'ES256')}`);
    }
    return lines.join('\n');
  }
  const lines = ['[servers.remote.auth]', 'type = "oauth"', `client_metadata_url = ${toml(CLIMD_URL)}`];
  if (context.client_id) lines.push(`client_id = ${toml(context.client_id)}`);
  if (context.client_secret) lines.push(`client_secret = ${toml(context.client_secret)}`);
  return lines.join('\n');
}
const auth = authTable();
writeFileSync(config, `[servers.remote]\nurl = ${toml(serverUrl)}\n${auth}\n`);
const needsLogin = auth.includes('type = "oauth"');

// `toolgate login remote`: each authorization URL it prints is followed the way a browser
// that approves at once would, ending at toolgate's loopback redirect listener.
function login() {
  return new Promise((resolve) => {
    const child = spawn(toolgate, ['--config', config, 'login', 'remote', '--no-browser', '--timeout', String(LOGIN_TIMEOUT_SECS)], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines = readline.createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      log('login:', line);
      const match = line.match(/^\s+(https?:\/\/\S+)$/);
      if (match) {
        fetch(match[1], { redirect: 'follow' })
          .then((response) => log('redirect followed:', response.status))
          .catch((error) => log('following the authorization URL failed:', error.message));
      }
    });
    child.on('close', (code) => resolve(code === 0));
  });
}

// Arguments for a tool from its input schema: numbers 1, 2, ...; strings, booleans.
function argumentsFor(tool) {
  const args = {};
  let n = 1;
  for (const [name, schema] of Object.entries(tool.inputSchema?.properties ?? {})) {
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    if (type === 'number' || type === 'integer') args[name] = n++;
    else if (type === 'boolean') args[name] = true;
    else if (type === 'string') args[name] = 'test';
  }
  return args;
}

const authCode = (result) => result?._meta?.['toolgate/error']?.code;

let status = 0;
let client;
try {
  if (needsLogin && !(await login())) {
    log('toolgate login failed');
    status = 1;
  } else {
    client = new Client({ name: 'toolgate-conformance-driver', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    // Accept every elicitation with the schema's defaults (what a user who changes nothing sends).
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      const content = {};
      for (const [name, schema] of Object.entries(request.params.requestedSchema?.properties ?? {})) {
        if (schema.default !== undefined) content[name] = schema.default;
      }
      return { action: 'accept', content };
    });
    await client.connect(new StdioClientTransport({ command: toolgate, args: ['--config', config, 'serve'], env, stderr: 'inherit' }));
    let relogins = 0;
    const { tools } = await client.listTools();
    log(`${tools.length} tools: ${tools.map((t) => t.name).join(', ')}`);
    for (const tool of tools) {
      const args = argumentsFor(tool);
      let result = await client.callTool({ name: tool.name, arguments: args });
      while (authCode(result) === 'UPSTREAM_AUTH_REQUIRED' && relogins < MAX_RELOGINS) {
        relogins++;
        log(`${tool.name}: ${result.content?.[0]?.text}; logging in again`);
        if (!(await login())) break;
        result = await client.callTool({ name: tool.name, arguments: args });
      }
      log(`${tool.name}: ${JSON.stringify(result.content)}`);
      if (result.isError) status = 1;
    }
  }
} catch (error) {
  log('failed:', error?.stack ?? error);
  status = 1;
} finally {
  if (client) await client.close().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
process.exit(status);
