//! A GPU node that accepts the connection and never says a word (issue 20,
//! item 8): a real `TcpListener` on loopback stands in for it, reached with
//! the system's real OpenSSH client through a `Host` alias of a client
//! configuration of the test's own (`FLASHPROF_SSH_CONFIG`). `check` must
//! fail with ssh's reason within seconds, and the TUI must say why in its
//! header, not only in a footer that cuts long lines.

mod pty_support;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flashprof::app::remote::{CONNECT_TIMEOUT_S, SSH_CONFIG_ENV};
use pty_support::{save_in_place, Session, STARTER};

const ALIAS: &str = "silent-node";

/// A listener that accepts every connection and keeps it open, silent,
/// for as long as the test holds it.
struct SilentNode {
    port: u16,
    accepted: Arc<Mutex<Vec<TcpStream>>>,
    config: tempfile::TempDir,
}

impl SilentNode {
    fn start() -> Self {
        assert!(
            Path::new("/usr/bin/ssh").exists(),
            "these tests need OpenSSH's client (apt-get install openssh-client)"
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                kept.lock().expect("accepted").push(stream);
            }
        });
        let config = tempfile::tempdir().expect("a folder for the ssh config");
        std::fs::write(
            config.path().join("ssh_config"),
            format!(
                "Host {ALIAS}\n  HostName 127.0.0.1\n  Port {port}\n  \
                 UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n"
            ),
        )
        .expect("ssh_config");
        Self {
            port,
            accepted,
            config,
        }
    }

    fn client_config(&self) -> PathBuf {
        self.config.path().join("ssh_config")
    }

    fn connections(&self) -> usize {
        self.accepted.lock().expect("accepted").len()
    }
}

/// What ssh says when the banner never comes, and flashprof's frame around it.
fn names_the_silence(text: &str) -> bool {
    text.contains("no connection to the GPU node (ssh silent-node)") && text.contains("timed out")
}

#[test]
fn check_against_a_silent_node_fails_within_seconds_with_the_reason() {
    let node = SilentNode::start();
    let started = Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(["check", "--no-timing", "--gpu-host", ALIAS])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/kernels/flash-prefill/reference.cu"
        ))
        .env(SSH_CONFIG_ENV, node.client_config())
        .output()
        .expect("flashprof runs");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(6), "{stderr}");
    assert!(names_the_silence(&stderr), "{stderr}");
    assert!(
        node.connections() >= 1,
        "ssh reached the listener on {}",
        node.port
    );
    // ssh's connect timeout, and a little for the process starts; without
    // it the worker's 60 s greeting wait and a probe came first.
    let bound = Duration::from_secs(CONNECT_TIMEOUT_S + 8);
    assert!(took < bound, "took {took:?}: {stderr}");
}

#[test]
fn the_tui_header_says_why_a_silent_node_checked_nothing() {
    let node = SilentNode::start();
    let folder = tempfile::tempdir().expect("temp folder");
    save_in_place(&folder.path().join("prefill.cu"), STARTER);
    let config = node.client_config();
    let session = Session::start_with_env(
        folder.path(),
        &[
            "prefill.cu",
            "--no-timing",
            "--no-counters",
            "--gpu-host",
            ALIAS,
        ],
        &[(SSH_CONFIG_ENV, &config)],
    );
    let screen = session.wait_for("the header to give the reason", |s| {
        s.lines().next().is_some_and(names_the_silence)
    });
    let header = screen.lines().next().unwrap_or_default();
    assert!(header.contains("NOT CHECKED: "), "{header}");
}
