//! A bad configuration exits 64 with a message naming the file and the key (or the
//! environment variable); `TOOLGATE_*` variables override the file.

mod common;

use common::*;

/// Exit code for a bad configuration.
const EXIT_CONFIG: Option<i32> = Some(64);

/// Runs `toolgate --config CONFIG ARGS...` with extra environment: (exit code, stdout, stderr).
fn run_with_env(
    config: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let output = std::process::Command::new(toolgate())
        .arg("--config")
        .arg(config)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run toolgate");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `toolgate --config <work's file> check`, expecting a configuration error: its stderr.
fn config_error(work: &Workdir) -> String {
    let config = work.config();
    let (code, stdout, stderr) = run_toolgate(&["--config", config.to_str().unwrap(), "check"]);
    assert_eq!(code, EXIT_CONFIG, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.is_empty(), "nothing is checked: {stdout}");
    assert!(
        stderr.contains(config.to_str().unwrap()),
        "the message must name the file: {stderr}"
    );
    stderr
}

/// The first column of `toolgate tools`: the exposed names.
fn exposed_names(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The line `toolgate check` printed for `server` (`NAME\tSTATE`).
fn check_line<'a>(stdout: &'a str, server: &str) -> &'a str {
    let prefix = format!("{server}\t");
    stdout
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {server:?} in check output:\n{stdout}"))
}

#[test]
fn missing_config_file_exits_64_naming_it() {
    let work = Workdir::new("");
    let missing = work.path("no-such-servers.toml");
    let (code, stdout, stderr) = run_toolgate(&["--config", missing.to_str().unwrap(), "check"]);
    assert_eq!(code, EXIT_CONFIG, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("not found"), "{stderr}");
}

#[test]
fn unknown_key_exits_64_naming_file_and_key() {
    let work = Workdir::new("[servers.echo]\ncomand = \"echo-server\"\n");
    let stderr = config_error(&work);
    assert!(stderr.contains("servers.echo"), "{stderr}");
    assert!(stderr.contains("comand"), "{stderr}");
}

#[test]
fn unset_variable_exits_64_naming_key_and_variable() {
    const UNSET: &str = "TOOLGATE_TESTS_SURELY_UNSET_3F9A";
    assert!(std::env::var_os(UNSET).is_none());
    let work = Workdir::new(&format!(
        "[servers.echo]\ncommand = \"${{{UNSET}}}/bin/x\"\n"
    ));
    let stderr = config_error(&work);
    assert!(stderr.contains("`servers.echo.command`"), "{stderr}");
    assert!(stderr.contains(UNSET), "{stderr}");
    assert!(stderr.contains("not set"), "{stderr}");
}

#[test]
fn server_with_both_command_and_url_exits_64() {
    let work = Workdir::new(
        "[servers.echo]\ncommand = \"echo-server\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
    );
    let stderr = config_error(&work);
    assert!(stderr.contains("`servers.echo`"), "{stderr}");
    assert!(stderr.contains("command"), "{stderr}");
    assert!(stderr.contains("url"), "{stderr}");
    assert!(stderr.contains("both"), "{stderr}");
}

#[test]
fn bad_server_name_exits_64_naming_it() {
    let work = Workdir::new(&server_toml("Bad_Name", "echo_server", &[]));
    let stderr = config_error(&work);
    assert!(stderr.contains("`servers.Bad_Name`"), "{stderr}");
    assert!(
        stderr.contains("[a-z0-9-]"),
        "the rule is missing: {stderr}"
    );
}

#[test]
fn env_prefix_policy_overrides_the_file() {
    let work = Workdir::new(&format!(
        "[gateway]\nprefix = \"always\"\n{}",
        server_toml("echo", "echo_server", &[])
    ));
    let config = work.config();

    let (code, stdout, stderr) = run_with_env(&config, &["tools"], &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(exposed_names(&stdout).contains(&"echo__echo".to_owned()));

    let (code, stdout, stderr) = run_with_env(
        &config,
        &["tools"],
        &[("TOOLGATE_GATEWAY__PREFIX", "never")],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        exposed_names(&stdout),
        ["echo", "add", "sleep", "fail", "add_tool", "remove_tool"]
    );
}

#[test]
fn env_override_keeps_the_case_of_env_keys() {
    // The file starts echo normally; the variables give it `ECHO_EXIT_AT_START` and
    // `ECHO_STDERR_MSG`, which it reads only if their names keep their upper case.
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let config = work.config();
    let (code, stdout, stderr) = run_with_env(&config, &["check"], &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");

    let (code, stdout, stderr) = run_with_env(
        &config,
        &["check"],
        &[
            ("TOOLGATE_SERVERS__ECHO__ENV__ECHO_EXIT_AT_START", "now"),
            (
                "TOOLGATE_SERVERS__ECHO__ENV__ECHO_STDERR_MSG",
                "case-kept-marker",
            ),
        ],
    );
    assert_ne!(code, Some(0), "echo must have exited at start\n{stdout}");
    assert_ne!(code, EXIT_CONFIG, "{stderr}");
    let echo = check_line(&stdout, "echo");
    assert!(echo.starts_with("echo\tfailed: "), "{echo}");
    assert!(echo.contains("case-kept-marker"), "{echo}");
    // `now` is not a number, so echo-server exits with 1.
    assert!(echo.contains("exit status: 1"), "{echo}");
}

#[test]
fn env_override_value_that_looks_like_a_number_is_passed_as_a_string() {
    // Environment values are strings; `env.ECHO_EXIT_AT_START = "5"` must reach echo as `5`.
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let (code, stdout, stderr) = run_with_env(
        &work.config(),
        &["check"],
        &[("TOOLGATE_SERVERS__ECHO__ENV__ECHO_EXIT_AT_START", "5")],
    );
    assert_ne!(
        code, EXIT_CONFIG,
        "a numeric value was rejected as configuration: {stderr}"
    );
    assert_ne!(code, Some(0), "echo must have exited at start\n{stdout}");
    let echo = check_line(&stdout, "echo");
    assert!(echo.contains("exit status: 5"), "{echo}");
}

#[test]
fn bad_worker_threads_exits_64_naming_the_variable() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    for args in [&["serve"][..], &["tools"][..]] {
        for value in ["abc", "0", "-1", ""] {
            let (code, stdout, stderr) =
                run_with_env(&work.config(), args, &[("TOKIO_WORKER_THREADS", value)]);
            assert_eq!(code, EXIT_CONFIG, "{args:?} {value:?}: {stderr}");
            assert!(stdout.is_empty(), "{args:?} {value:?}: {stdout}");
            assert!(
                stderr.contains(&format!("TOKIO_WORKER_THREADS={value:?}")),
                "{args:?} {value:?}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{args:?} {value:?}: {stderr}");
        }
    }
    // A good value gives tokio's pool of that many workers, and the command runs.
    let (code, stdout, stderr) =
        run_with_env(&work.config(), &["tools"], &[("TOKIO_WORKER_THREADS", "2")]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        exposed_names(&stdout).contains(&"echo__echo".to_owned()),
        "{stdout}"
    );
}
