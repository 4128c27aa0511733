"""An MCP client on the official Python SDK (`mcp`), driven by tests/interop_clients.rs.

Usage: client.py stdio MODE NONCE DIR TOOLGATE CONFIG
       client.py http  MODE NONCE DIR URL

MODE is the SDK's connect mode: `legacy` (the initialize handshake) or `auto` (the SDK's
default: probe `server/discover`, fall back to initialize). It connects to toolgate (which
fronts server-everything, filesystem, memory and time), does one thing per step, and prints
one JSON line per step to stdout: {"step": NAME, ...what it observed} or
{"step": NAME, "error": TEXT}. A failed step does not stop the later ones. The test judges
the lines; this script decides nothing.
"""

import json
import sys
import traceback

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters


SERVERS = ["everything", "filesystem", "memory", "time"]


def emit(step, **observed):
    print(json.dumps({"step": step, **observed}), flush=True)


def texts(result):
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def main():
    transport, mode, nonce, workdir, *target = sys.argv[1:]
    if transport == "stdio":
        toolgate, config = target
        server = StdioServerParameters(command=toolgate, args=["--config", config, "serve"])
    else:
        (server,) = target

    sampled, elicited, logs = [], [], []

    async def on_sampling(_context, params):
        sampled.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled answer {nonce}"),
            model="interop-model",
            stop_reason="endTurn",
        )

    async def on_elicitation(_context, params):
        elicited.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content={"name": f"Ada {nonce}", "check": True})

    async def on_log(params):
        logs.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))

    client = Client(
        server,
        mode=mode,
        sampling_callback=on_sampling,
        elicitation_callback=on_elicitation,
        logging_callback=on_log,
        log_level="debug",
        read_timeout_seconds=60,
    )

    async def step(name, body):
        try:
            emit(name, **(await body()))
        except Exception as error:  # the test reads which step failed and why
            emit(name, error=f"{type(error).__name__}: {error}", trace=traceback.format_exc(limit=3))

    async with client:
        emit(
            "connect",
            protocol_version=client.protocol_version,
            capabilities=client.server_capabilities.model_dump(mode="json", by_alias=True, exclude_none=True),
        )

        async def list_tools():
            # toolgate starts its upstreams in the background and announces each one's tools
            # with tools/list_changed; poll until all four are there (or 60 s).
            names = []
            with anyio.move_on_after(60):
                while True:
                    names = [t.name for t in (await client.list_tools()).tools]
                    if all(any(n.startswith(f"{s}__") for n in names) for s in SERVERS):
                        break
                    await anyio.sleep(0.2)
            return {"tools": names}

        async def echo():
            result = await client.call_tool("everything__echo", {"message": f"hello {nonce}"})
            return {"texts": texts(result), "is_error": bool(result.is_error)}

        async def filesystem():
            result = await client.call_tool("filesystem__read_text_file", {"path": f"{workdir}/note.txt"})
            return {"texts": texts(result), "is_error": bool(result.is_error)}

        async def memory():
            await client.call_tool(
                "memory__create_entities",
                {"entities": [{"name": f"entity-{nonce}", "entityType": "test", "observations": ["seen"]}]},
            )
            result = await client.call_tool("memory__read_graph", {})
            return {"texts": texts(result), "is_error": bool(result.is_error)}

        async def time():
            result = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
            return {"texts": texts(result), "is_error": bool(result.is_error)}

        async def progress():
            seen = []

            async def on_progress(progress, total, message):
                seen.append({"progress": progress, "total": total})

            result = await client.call_tool(
                "everything__trigger-long-running-operation",
                {"duration": 0.6, "steps": 3},
                progress_callback=on_progress,
            )
            return {"progress": seen, "texts": texts(result), "is_error": bool(result.is_error)}

        async def resource():
            listed = (await client.list_resources()).resources
            uris = [r.uri for r in listed]
            wanted = next(u for u in uris if u.endswith("/architecture.md"))
            read = await client.read_resource(wanted)
            return {"uris": uris, "read": wanted, "contents": [c.model_dump(mode="json") for c in read.contents]}

        async def prompt():
            names = [p.name for p in (await client.list_prompts()).prompts]
            got = await client.get_prompt("everything__args-prompt", {"city": f"City {nonce}"})
            return {"prompts": names, "messages": [m.model_dump(mode="json") for m in got.messages]}

        async def sampling():
            result = await client.call_tool("everything__trigger-sampling-request", {"prompt": f"ask {nonce}"})
            return {"asked": sampled, "texts": texts(result), "is_error": bool(result.is_error)}

        async def elicitation():
            result = await client.call_tool("everything__trigger-elicitation-request", {})
            return {"asked": elicited, "texts": texts(result), "is_error": bool(result.is_error)}

        async def logging():
            if mode == "legacy":
                await client.set_logging_level("debug")
            result = await client.call_tool("everything__toggle-simulated-logging", {})
            # server-everything sends the first message right away, then one every 5 s.
            with anyio.move_on_after(10):
                while not logs:
                    await anyio.sleep(0.05)
            await client.call_tool("everything__toggle-simulated-logging", {})
            return {"logs": logs, "texts": texts(result)}

        for name, body in [
            ("tools/list", list_tools),
            ("call everything", echo),
            ("call filesystem", filesystem),
            ("call memory", memory),
            ("call time", time),
            ("progress", progress),
            ("resource", resource),
            ("prompt", prompt),
            ("sampling", sampling),
            ("elicitation", elicitation),
            ("logging", logging),
        ]:
            await step(name, body)
    emit("done")


anyio.run(main)
