"""`tools/call` through toolgate from the official Python SDK's client to a Python upstream.

The measurement issue 10 quotes from outside ("a Python SDK client and a Python upstream"):
an echo tool on the SDK's own server (`MCPServer`, over stdio), called directly and through
toolgate over stdio and over HTTP (`serve --http`, its upstream the same server over stdio),
and, for comparison, the same server serving streamable HTTP itself (no gateway). Prints one
Markdown table: p50 and p99 of sequential calls, calls/s from 16 concurrent callers, and the
client's own CPU per call in that phase (`time.process_time()`).

Usage: python scripts/py-sdk-calls.py TOOLGATE...
  run with the Python that .ci/interop-deps set up: target/interop/venv/bin/python
Env: MODE (the client's connect mode: `legacy`, the initialize handshake, default; or
`auto`, the SDK's default, which probes `server/discover` first), ROUNDS (default 4),
SEQUENTIAL (calls per round, default 500), CONCURRENT (calls per round from 16 callers,
default 3000).

The paths take turns in one process, round by round, every other round in reverse order, with
a garbage collection before each turn. In one fixed order, the binary given second read the
higher stdio p50 in 7 of 8 runs, 2 of them with the same binary given twice (BENCHMARKS.md,
issue 10). Even so, in two runs with this order one binary given twice read p50s 2–8% apart
over stdio and 8–20% over HTTP (of the first): a smaller difference needs several runs.
"""

import gc
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROUNDS = int(os.environ.get("ROUNDS", 4))
SEQUENTIAL = int(os.environ.get("SEQUENTIAL", 500))
CONCURRENT = int(os.environ.get("CONCURRENT", 3000))
MODE = os.environ.get("MODE", "legacy")
CALLERS = 16
TEXT = "hello world!"

SERVER = '''
import os, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("py-echo")

@server.tool()
def echo(text: str) -> str:
    """Returns its text."""
    return text

if len(sys.argv) > 1:
    server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
else:
    server.run()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(process, pattern, timeout=60):
    """Reads the process's stderr until a line matches `pattern`; returns its first group."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            raise RuntimeError(f"exited before listening: {''.join(seen)}")
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            # Keep reading what it writes, so that a full pipe never stops it mid-run.
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
            return found.group(1)
    raise RuntimeError(f"not listening after {timeout} s: {''.join(seen)}")


async def call(client, name):
    result = await client.call_tool(name, {"text": TEXT})
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    if result.is_error or texts[:1] != [TEXT]:
        raise RuntimeError(f"{name} answered {result}")


async def round_of(path):
    """One round on one path: sequential calls, then calls from CALLERS callers."""
    client = path["client"]
    for _ in range(SEQUENTIAL):
        start = time.perf_counter()
        await call(client, path["tool"])
        path["samples"].append((time.perf_counter() - start) * 1e6)
    left = CONCURRENT

    async def caller():
        nonlocal left
        while left > 0:
            left -= 1
            await call(client, path["tool"])

    cpu = time.process_time()
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(CALLERS):
            group.start_soon(caller)
    path["seconds"] += time.perf_counter() - start
    path["cpu"] += time.process_time() - cpu


async def main():
    gateways = sys.argv[1:]
    if not gateways:
        sys.exit("usage: py-sdk-calls.py TOOLGATE...")
    work = tempfile.mkdtemp(prefix="py-sdk-calls-")
    server = os.path.join(work, "echo.py")
    with open(server, "w") as f:
        f.write(SERVER)
    config = os.path.join(work, "servers.toml")
    with open(config, "w") as f:
        f.write(f'[servers.s0]\ncommand = "{sys.executable}"\nargs = ["{server}"]\n')

    paths = [{"label": "direct: Python SDK → Python server (stdio)", "tool": "echo",
              "stdio": StdioServerParameters(command=sys.executable, args=[server])}]
    for gateway in gateways:
        paths.append({"label": f"Python SDK → {gateway} (stdio) → Python server", "tool": "s0__echo",
                      "stdio": StdioServerParameters(command=gateway, args=["--config", config, "serve"],
                                                      env={**os.environ, "RUST_LOG": "warn"})})
    for gateway in gateways:
        paths.append({"label": f"Python SDK → {gateway} (HTTP) → Python server (stdio)", "tool": "s0__echo",
                      "http": ([gateway, "--config", config, "serve", "--http", "127.0.0.1:0"],
                               r"^toolgate: listening on (\S+)$")})
    port = free_port()
    paths.append({"label": "direct: Python SDK → Python server (HTTP, the SDK's server)", "tool": "echo",
                  "http": ([sys.executable, server, str(port)], r"Uvicorn running on (http://\S+)"),
                  "suffix": "/mcp"})

    # Every path's client open at once, and the rounds interleaved (see the module doc), so
    # that drift in background load hits every path alike.
    processes = []
    try:
        async with AsyncExitStack() as stack:
            for path in paths:
                path.update(samples=[], seconds=0.0, cpu=0.0)
                if "http" in path:
                    command, pattern = path["http"]
                    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.PIPE, text=True,
                                               env={**os.environ, "RUST_LOG": "warn"})
                    processes.append(process)
                    target = listening(process, pattern).rstrip("/") + path.get("suffix", "")
                else:
                    target = path["stdio"]
                path["client"] = await stack.enter_async_context(Client(target, mode=MODE, read_timeout_seconds=60))
                for _ in range(100):
                    await call(path["client"], path["tool"])
            for turn in range(ROUNDS):
                for path in paths if turn % 2 == 0 else reversed(paths):
                    gc.collect()
                    await round_of(path)
    finally:
        for process in processes:
            process.kill()
            process.wait()

    def pct(samples, q):
        ordered = sorted(samples)
        return ordered[int((len(ordered) - 1) * q)]

    direct = paths[0]
    rate = lambda path: CONCURRENT * ROUNDS / path["seconds"]
    print(f"mode {MODE}; {ROUNDS} rounds of {SEQUENTIAL} sequential calls and {CONCURRENT} from {CALLERS} callers")
    print()
    print(f"| path | p50 µs | p99 µs | added p50 | calls/s ({CALLERS} callers) | × direct "
          f"| client CPU µs/call ({CALLERS} callers) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = pct(direct["samples"], 0.5)
    for path in paths:
        p50 = pct(path["samples"], 0.5)
        added = "–" if path is direct else f"{p50 - base:+.0f} µs ({(p50 - base) / base:+.0%})"
        print(f"| {path['label']} | {p50:.0f} | {pct(path['samples'], 0.99):.0f} | {added} "
              f"| {rate(path):.0f} | {rate(path) / rate(direct):.2f} "
              f"| {path['cpu'] * 1e6 / (CONCURRENT * ROUNDS):.0f} |")


anyio.run(main)
