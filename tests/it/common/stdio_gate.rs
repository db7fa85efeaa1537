//! `toolgate stdio`: the real binary with its stdin and stdout in the test's hands.

use serde_json::{Value, json};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// toolgate in stdio mode, its stdin and stdout in the test's hands.
pub struct StdioGate {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    logs: Arc<Mutex<Vec<String>>>,
}

impl StdioGate {
    pub fn start(
        command: &[String],
        config: Option<&str>,
    ) -> (StdioGate, Option<super::tempfile_lite::TempFile>) {
        let file = config.map(super::tempfile_lite::TempFile::new);
        let mut args = vec!["stdio".to_string()];
        if let Some(f) = &file {
            args.extend(["--config".to_string(), f.path.display().to_string()]);
        }
        args.push("--".into());
        args.extend(command.iter().cloned());
        (StdioGate::start_args(args), file)
    }

    /// The binary with `args`, each of its pipes the test's, killed on drop: for a test
    /// that reads (or does not read) them itself.
    pub fn command<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Command {
        StdioGate::command_through(&[], args)
    }

    /// The same, the binary started by `launcher` (a program and its arguments, which run
    /// the binary with the arguments that follow them).
    pub fn command_through<S: AsRef<std::ffi::OsStr>>(
        launcher: &[String],
        args: impl IntoIterator<Item = S>,
    ) -> Command {
        let mut cmd = super::binary_through(launcher);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    pub fn start_args(args: Vec<String>) -> StdioGate {
        StdioGate::start_args_env(args, &[])
    }

    /// The same, with these environment variables besides.
    pub fn start_args_env(args: Vec<String>, env: &[(&str, &str)]) -> StdioGate {
        StdioGate::start_through(&[], args, env)
    }

    /// The same, the binary started by `launcher` ([`StdioGate::command_through`]).
    pub fn start_through(
        launcher: &[String],
        args: Vec<String>,
        env: &[(&str, &str)],
    ) -> StdioGate {
        let mut child = StdioGate::command_through(launcher, args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "toolgate=debug,info")
            .env_remove("TOOLGATE_PEERS_DIR")
            .env_remove("TOOLGATE_REDIS_SERVER")
            .spawn()
            .unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(l)) = err.next_line().await {
                sink.lock().unwrap().push(l);
            }
        });
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        StdioGate {
            child,
            stdin,
            stdout,
            logs,
        }
    }

    pub async fn send(&mut self, line: impl AsRef<[u8]>) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_ref()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn recv(&mut self) -> Value {
        let line = self.recv_text().await;
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line}"))
    }

    /// The next line toolgate writes, as written.
    pub async fn recv_text(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("a line")
    }

    /// The next line toolgate writes, or `None` at the end of its output.
    pub async fn next_line(&mut self) -> Option<String> {
        self.stdout.next_line().await.unwrap()
    }

    /// Sends a request and reads until its answer, passing over what the server sends on
    /// its own meanwhile (notifications, its own requests).
    pub async fn ask_past_notifications(&mut self, msg: Value) -> Value {
        let id = msg["id"].clone();
        self.send(&msg.to_string()).await;
        loop {
            let m = self.recv().await;
            if m.get("method").is_none() && m["id"] == id {
                return m;
            }
        }
    }

    pub async fn ask(&mut self, msg: Value) -> Value {
        self.send(&msg.to_string()).await;
        self.recv().await
    }

    pub async fn initialize(&mut self) {
        let a = self.ask(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})).await;
        assert!(a["result"]["serverInfo"].is_object(), "{a}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
            .await;
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    pub async fn logs_when(&self, ready: impl Fn(&str) -> bool) -> String {
        super::logs_when(&self.logs, ready).await
    }
}
