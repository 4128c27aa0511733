//! `toolgate import`: each client's real config format, read from its default location, becomes
//! a servers.toml that `toolgate check` accepts, with no secret in any output; renames and
//! skips are reported; `--print-client-config` prints snippets that reach a real gateway.

mod common;

use std::path::{Path, PathBuf};

use common::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/import");
/// Exit codes of `toolgate import` (documented in src/import.rs and the README).
const EXIT_SKIPPED: Option<i32> = Some(3);
const EXIT_CONFIG: Option<i32> = Some(64);

/// The secret values written into the fixtures: none may come out of `toolgate import`.
const CLAUDE_SECRETS: &[&str] = &[
    "ghp_FixtureClaude0000000000000000000001",
    "BSAfixtureClaudeBraveKey0002",
    "FixtureClaudePgPass0003",
    "sntrys_FixtureClaudeSentry0004",
];
const CURSOR_SECRETS: &[&str] = &[
    "github_pat_FixtureCursorGlobal0001",
    "ctx7sk-FixtureCursorCtx0002",
    "sk_test_FixtureCursorStripe0003",
    "FixtureCursorStripeHeader0004",
    "FixtureCursorSearchArg0005",
];
const VSCODE_SECRETS: &[&str] = &["FixtureVscodeJiraToken0001"];
const WINDSURF_SECRETS: &[&str] = &[
    "ghp_FixtureWindsurf00000000000000000001",
    "rk_live_FixtureWindsurfStripe0002",
    "xoxb-FixtureWindsurfSlack0003",
];

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// A made-up machine: a home and a project directory, so that the default locations are
/// exercised without touching the real ones.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    fn new() -> Self {
        let machine = Self {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        for dir in [machine.home(), machine.project(), machine.no_programs()] {
            std::fs::create_dir_all(dir).expect("create dir");
        }
        machine
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// An empty directory for PATH: no `npx`, `uvx` or `docker` starts during `check`.
    fn no_programs(&self) -> PathBuf {
        self.dir.path().join("empty-bin")
    }

    fn claude_config(&self) -> PathBuf {
        let dir = if cfg!(target_os = "macos") {
            "Library/Application Support"
        } else {
            ".config"
        };
        self.home()
            .join(dir)
            .join("Claude/claude_desktop_config.json")
    }

    /// Copies a fixture to `to`; returns its text.
    fn place(&self, fixture: &str, to: &Path) -> String {
        let text = std::fs::read_to_string(Path::new(FIXTURES).join(fixture)).expect("fixture");
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("create dir");
        std::fs::write(to, &text).expect("place fixture");
        text
    }

    /// `toolgate ARGS` in the project directory, with this machine's home.
    fn toolgate(&self, args: &[&str], env: &[(String, String)]) -> Run {
        let output = std::process::Command::new(toolgate())
            .args(args)
            .current_dir(self.project())
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run toolgate");
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Machine-specific paths replaced, for snapshots.
    fn redact(&self, text: &str) -> String {
        let mut text = text.replace(
            &self.claude_config().display().to_string(),
            "[CLAUDE_CONFIG]",
        );
        for (path, name) in [(self.project(), "[PROJECT]"), (self.home(), "[HOME]")] {
            if let Ok(real) = path.canonicalize() {
                text = text.replace(&real.display().to_string(), name);
            }
            text = text.replace(&path.display().to_string(), name);
        }
        text.replace(FIXTURES, "[FIXTURES]")
    }

    /// Runs `toolgate check` on `toml` with every `${VAR}` set: the configuration must be
    /// accepted (no exit 64) and every server must be reported, although none can start
    /// here. Without the variables it must be refused, naming one: they are real references.
    fn check_accepts(&self, toml: &str) {
        let config = self.dir.path().join("imported.toml");
        std::fs::write(&config, toml).expect("write config");
        let config = config.to_str().expect("utf-8 path");
        let vars = variables(toml);
        let mut env: Vec<(String, String)> = vars
            .iter()
            .map(|v| (v.clone(), "placeholder-value".to_owned()))
            .collect();
        env.push(("PATH".into(), self.no_programs().display().to_string()));
        let run = self.toolgate(&["--config", config, "check"], &env);
        assert_ne!(
            run.code, EXIT_CONFIG,
            "check refused the config:\n{}",
            run.stderr
        );
        assert!(!run.stderr.contains("key `"), "{}", run.stderr);
        let servers = server_names(toml);
        assert!(!servers.is_empty(), "nothing was imported:\n{toml}");
        for server in &servers {
            assert!(
                run.stdout
                    .lines()
                    .any(|l| l.starts_with(&format!("{server}\t"))),
                "check does not report {server}:\n{}",
                run.stdout
            );
        }
        if !vars.is_empty() {
            let path = [("PATH".to_owned(), self.no_programs().display().to_string())];
            let run = self.toolgate(&["--config", config, "check"], &path);
            assert_eq!(run.code, EXIT_CONFIG, "{}", run.stderr);
            assert!(run.stderr.contains("is not set"), "{}", run.stderr);
        }
    }
}

/// The `${NAME}`s of a generated file (`$${` is an escaped dollar, not a reference).
fn variables(toml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = toml;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').expect("closed ${");
            out.push(body[..end].to_owned());
            rest = &body[end..];
        } else {
            rest = after;
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The `[servers.NAME]` tables of a generated file.
fn server_names(toml: &str) -> Vec<String> {
    let value: toml::Table = toml.parse().expect("the output is TOML");
    value
        .get("servers")
        .and_then(|s| s.as_table())
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default()
}

/// No secret of `fixture_text` appears in any of `outputs`; each is really in the fixture, so
/// this cannot pass by looking for the wrong strings.
fn assert_no_secrets(fixture_text: &str, secrets: &[&str], outputs: &[&str]) {
    for secret in secrets {
        assert!(
            fixture_text.contains(secret),
            "{secret} is not in the fixture"
        );
        for output in outputs {
            assert!(!output.contains(secret), "{secret} leaked into:\n{output}");
        }
    }
}

#[test]
fn claude_desktop_config_from_its_default_location() {
    let machine = Machine::new();
    let text = machine.place("claude_desktop_config.json", &machine.claude_config());
    let run = machine.toolgate(&["import", "--from", "claude"], &[]);
    assert_eq!(run.code, EXIT_SKIPPED, "{}", run.stderr);
    assert_no_secrets(&text, CLAUDE_SECRETS, &[&run.stdout, &run.stderr]);
    assert!(
        run.stderr
            .contains(r#"renamed server "Brave Search" to "brave-search""#),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("skipped mcpServers.asana"),
        "{}",
        run.stderr
    );
    insta::assert_snapshot!("claude_toml", run.stdout);
    insta::assert_snapshot!("claude_report", machine.redact(&run.stderr));
    machine.check_accepts(&run.stdout);
}

#[test]
fn cursor_user_and_project_configs_merge() {
    let machine = Machine::new();
    let global = machine.place(
        "cursor/global_mcp.json",
        &machine.home().join(".cursor/mcp.json"),
    );
    let project = machine.place(
        "cursor/project_mcp.json",
        &machine.project().join(".cursor/mcp.json"),
    );
    let run = machine.toolgate(&["import", "--from", "cursor"], &[]);
    assert_eq!(run.code, EXIT_SKIPPED, "{}", run.stderr);
    assert_no_secrets(
        &format!("{global}{project}"),
        CURSOR_SECRETS,
        &[&run.stdout, &run.stderr],
    );
    assert!(run.stderr.contains("mcpServers.docs in"), "{}", run.stderr);
    assert!(run.stderr.contains("replaces the one in"), "{}", run.stderr);
    assert!(
        run.stderr.contains("skipped mcpServers.events"),
        "{}",
        run.stderr
    );
    insta::assert_snapshot!("cursor_toml", machine.redact(&run.stdout));
    insta::assert_snapshot!("cursor_report", machine.redact(&run.stderr));
    machine.check_accepts(&run.stdout);
}

#[test]
fn vscode_workspace_config_with_inputs() {
    let machine = Machine::new();
    let text = machine.place(
        "vscode/mcp.json",
        &machine.project().join(".vscode/mcp.json"),
    );
    let run = machine.toolgate(&["import", "--from", "vscode"], &[]);
    assert_eq!(run.code, EXIT_SKIPPED, "{}", run.stderr);
    assert_no_secrets(&text, VSCODE_SECRETS, &[&run.stdout, &run.stderr]);
    assert!(
        run.stderr.lines().any(|l| l.contains("export GITHUB_PAT=")
            && l.contains(r#"VS Code input "github_pat" (password)"#)),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("skipped servers.legacy-events"),
        "{}",
        run.stderr
    );
    insta::assert_snapshot!("vscode_toml", machine.redact(&run.stdout));
    insta::assert_snapshot!("vscode_report", machine.redact(&run.stderr));
    machine.check_accepts(&run.stdout);
}

#[test]
fn windsurf_config_from_its_default_location() {
    let machine = Machine::new();
    let text = machine.place(
        "windsurf/mcp_config.json",
        &machine.home().join(".codeium/windsurf/mcp_config.json"),
    );
    let run = machine.toolgate(&["import", "--from", "windsurf"], &[]);
    assert_eq!(run.code, EXIT_SKIPPED, "{}", run.stderr);
    assert_no_secrets(&text, WINDSURF_SECRETS, &[&run.stdout, &run.stderr]);
    assert!(
        run.stderr.contains("skipped mcpServers.puppeteer"),
        "{}",
        run.stderr
    );
    insta::assert_snapshot!("windsurf_toml", run.stdout);
    insta::assert_snapshot!("windsurf_report", machine.redact(&run.stderr));
    machine.check_accepts(&run.stdout);
}

#[test]
fn out_file_is_never_overwritten_without_force() {
    let machine = Machine::new();
    let fixture = format!("{FIXTURES}/windsurf/mcp_config.json");
    let out = machine.dir.path().join("servers.toml");
    let out_arg = out.to_str().expect("utf-8 path");
    let args = ["import", "--from", &fixture, "--out", out_arg];
    let first = machine.toolgate(&args, &[]);
    assert_eq!(first.code, EXIT_SKIPPED, "{}", first.stderr);
    assert!(
        first.stdout.is_empty(),
        "the TOML goes to the file: {}",
        first.stdout
    );
    let written = std::fs::read_to_string(&out).expect("written");
    let text = std::fs::read_to_string(&fixture).expect("fixture");
    assert_no_secrets(&text, WINDSURF_SECRETS, &[&written, &first.stderr]);
    assert_eq!(server_names(&written).len(), 4, "{written}");

    std::fs::write(&out, "# mine\n").expect("overwrite");
    let refused = machine.toolgate(&args, &[]);
    assert_eq!(refused.code, Some(73), "{}", refused.stderr);
    assert!(refused.stderr.contains("--force"), "{}", refused.stderr);
    assert_eq!(std::fs::read_to_string(&out).expect("kept"), "# mine\n");

    let forced = machine.toolgate(&[&args[..], &["--force"]].concat(), &[]);
    assert_eq!(forced.code, EXIT_SKIPPED, "{}", forced.stderr);
    assert_eq!(std::fs::read_to_string(&out).expect("rewritten"), written);
}

#[test]
fn without_from_the_one_client_found_is_read() {
    let machine = Machine::new();
    let none = machine.toolgate(&["import"], &[]);
    assert_eq!(none.code, Some(66), "{}", none.stderr);
    assert!(
        none.stderr.contains(".codeium/windsurf/mcp_config.json"),
        "lists where it looked: {}",
        none.stderr
    );
    machine.place(
        "windsurf/mcp_config.json",
        &machine.home().join(".codeium/windsurf/mcp_config.json"),
    );
    let one = machine.toolgate(&["import"], &[]);
    assert_eq!(one.code, EXIT_SKIPPED, "{}", one.stderr);
    assert_eq!(server_names(&one.stdout).len(), 4, "{}", one.stdout);
    machine.place(
        "vscode/mcp.json",
        &machine.project().join(".vscode/mcp.json"),
    );
    let two = machine.toolgate(&["import"], &[]);
    assert_eq!(two.code, EXIT_CONFIG, "{}", two.stderr);
    assert!(two.stderr.contains("--from"), "{}", two.stderr);
}

#[test]
fn a_broken_client_config_names_the_file_and_line() {
    let machine = Machine::new();
    let path = machine.project().join("broken.json");
    std::fs::write(
        &path,
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": }\n  }\n}\n",
    )
    .expect("write");
    let run = machine.toolgate(&["import", "--from", path.to_str().expect("utf-8")], &[]);
    assert_eq!(run.code, Some(65), "{}", run.stderr);
    assert!(
        run.stderr.contains(path.to_str().expect("utf-8")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("line 3"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

/// The snippet's command, arguments and environment, run the way an MCP client runs a stdio
/// server (a base environment plus the entry's `env`), serve the tools once the user has
/// filled in the placeholder; without that `env` the gateway cannot start.
#[tokio::test]
async fn printed_stdio_snippet_starts_a_working_gateway() {
    let work = Workdir::new(&server_toml(
        "echo",
        "echo_server",
        &[("GREETING", "${ECHO_GREETING}")],
    ));
    let machine = Machine::new();
    let config = work.config();
    let run = machine.toolgate(
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "import",
            "--print-client-config",
            "claude",
        ],
        &[],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let snippet: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    let server = &snippet["mcpServers"]["toolgate"];
    let command = server["command"].as_str().expect("a command");
    assert_eq!(
        Path::new(command),
        toolgate().canonicalize().expect("binary"),
        "the absolute path of the binary"
    );
    let args: Vec<&str> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string"))
        .collect();
    assert!(Path::new(args[1]).is_absolute(), "{args:?}");
    assert_eq!(
        server["env"],
        serde_json::json!({"ECHO_GREETING": "<ECHO_GREETING>"}),
        "the config's variable, to fill in"
    );
    let client_process = |env: &[(&str, &str)]| {
        let mut process = tokio::process::Command::new(command);
        process
            .args(&args)
            .current_dir(machine.dir.path())
            .env_clear()
            .envs(
                ["PATH", "HOME"]
                    .iter()
                    .filter_map(|k| Some((k, std::env::var_os(k)?))),
            )
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::null());
        rmcp::transport::TokioChildProcess::new(process).expect("spawn")
    };
    let without = rmcp::ServiceExt::serve(Recorder::default(), client_process(&[])).await;
    assert!(
        without.is_err(),
        "ECHO_GREETING is unset: the config does not load"
    );
    let filled = client_process(&[("ECHO_GREETING", "hello")]);
    let client = rmcp::ServiceExt::serve(Recorder::default(), filled)
        .await
        .expect("MCP handshake");
    let names = tool_names(&client).await;
    assert!(names.contains(&"echo__echo".to_owned()), "{names:?}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn printed_http_snippets_reach_a_running_gateway() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let gateway = HttpGateway::start(&work).await;
    let machine = Machine::new();
    let print = |target: &str, extra: &[&str]| {
        let run = machine.toolgate(
            &[
                &[
                    "import",
                    "--print-client-config",
                    target,
                    "--http",
                    &gateway.url,
                ],
                extra,
            ]
            .concat(),
            &[],
        );
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        serde_json::from_str::<serde_json::Value>(&run.stdout).expect("JSON")
    };
    let vscode = print("vscode", &[]);
    assert_eq!(vscode["servers"]["toolgate"]["type"], "http");
    let url = vscode["servers"]["toolgate"]["url"].as_str().expect("url");
    let (client, _) = http_client(url).await;
    assert!(tool_names(&client).await.contains(&"echo__echo".to_owned()));
    client.cancel().await.expect("close");

    let cursor = print("cursor", &["--profile", "default"]);
    let url = cursor["mcpServers"]["toolgate"]["url"]
        .as_str()
        .expect("url");
    assert_eq!(url, format!("{}/default", gateway.url));
    let (client, _) = http_client(url).await;
    assert!(tool_names(&client).await.contains(&"echo__echo".to_owned()));
    client.cancel().await.expect("close");

    let claude = machine.toolgate(
        &[
            "import",
            "--print-client-config",
            "claude",
            "--http",
            &gateway.url,
        ],
        &[],
    );
    assert_eq!(claude.code, EXIT_CONFIG, "{}", claude.stderr);
    assert!(
        claude.stderr.contains("stdio servers only"),
        "{}",
        claude.stderr
    );
}
