//! A real OpenSSH server on a free loopback port, for the tests that take
//! `--gpu-host` through real ssh (tests/ssh.rs). Everything it needs lives
//! in a temporary folder of its own: a fresh host key and client key, the
//! server's configuration (that key only, no passwords), and a client
//! configuration with one `Host` alias that flashprof is pointed at through
//! `FLASHPROF_SSH_CONFIG`. The folder's path is the marker by which a test
//! finds every process it left: the server (`-f DIR/sshd_config`), the
//! clients (`-F DIR/ssh_config`) and the workers (started through links in
//! `DIR/bin`).
//!
//! It installs and starts a daemon, so the tests that use it are ignored
//! unless asked for (`FLASHPROF_SSH_TEST=1 scripts/test.sh`).
#![allow(dead_code)] // each test binary uses its own subset

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process_support;

/// The `Host` the client configuration defines.
pub const ALIAS: &str = "gpu-node";
const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd; stopped (with every session it still has) when dropped.
pub struct Sshd {
    folder: tempfile::TempDir,
    server: Child,
    pub port: u16,
}

impl Sshd {
    /// Installs OpenSSH's server where it is missing and starts one.
    pub fn start() -> Self {
        install_openssh_server();
        let folder = tempfile::Builder::new()
            .prefix("flashprof-sshd.")
            .tempdir()
            .expect("a folder for sshd");
        let dir = folder.path();
        std::fs::create_dir(dir.join("bin")).expect("bin folder");
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys"))
            .expect("authorized_keys");
        let port = free_port();
        let user = user_name();
        // The node's environment is its own: what the worker needs to find
        // NVRTC travels the way docs/REMOTE.md tells a cluster user to set it.
        let library_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        let server_config = format!(
            "Port {port}\n\
             ListenAddress 127.0.0.1\n\
             HostKey {dir}/host_key\n\
             PidFile {dir}/sshd.pid\n\
             AuthorizedKeysFile {dir}/authorized_keys\n\
             AllowUsers {user}\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\n\
             UsePAM no\n\
             StrictModes no\n\
             SetEnv LD_LIBRARY_PATH={library_path}\n\
             LogLevel VERBOSE\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("sshd_config"), server_config).expect("sshd_config");
        let host_key = std::fs::read_to_string(dir.join("host_key.pub")).expect("host key");
        std::fs::write(
            dir.join("known_hosts"),
            format!("[127.0.0.1]:{port} {host_key}"),
        )
        .expect("known_hosts");
        let client_config = format!(
            "Host {ALIAS}\n\
             \x20 HostName 127.0.0.1\n\
             \x20 Port {port}\n\
             \x20 User {user}\n\
             \x20 IdentityFile {dir}/client_key\n\
             \x20 IdentitiesOnly yes\n\
             \x20 UserKnownHostsFile {dir}/known_hosts\n\
             \x20 StrictHostKeyChecking yes\n\
             \x20 ConnectTimeout 10\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("ssh_config"), client_config).expect("ssh_config");
        // sshd wants its privilege separation folder, which a fresh container lacks.
        let _ = std::fs::create_dir_all("/run/sshd");
        let server = Command::new(SSHD)
            .arg("-D")
            .arg("-f")
            .arg(dir.join("sshd_config"))
            .arg("-E")
            .arg(dir.join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start sshd");
        let sshd = Self {
            folder,
            server,
            port,
        };
        sshd.wait_until_it_answers();
        sshd
    }

    pub fn folder(&self) -> &Path {
        self.folder.path()
    }

    /// The client configuration to give flashprof (`FLASHPROF_SSH_CONFIG`).
    pub fn client_config(&self) -> PathBuf {
        self.folder().join("ssh_config")
    }

    /// `program` under this server's marker: a link in `DIR/bin`, so every
    /// worker started through it can be found by its command line.
    pub fn marked(&self, program: &Path) -> PathBuf {
        let name = program.file_name().expect("a program name");
        let link = self.folder().join("bin").join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(program, &link).expect("link the program");
        }
        link
    }

    /// The processes the server started for its sessions (not the server itself).
    pub fn sessions(&self) -> Vec<process_support::Process> {
        process_support::descendants(self.server.id())
    }

    /// Cuts every connection from the server's side, as a dropped link
    /// does: its session processes are killed, the workers under them left
    /// to notice on their own.
    pub fn drop_connections(&self) {
        for session in self.sessions().iter().filter(|p| p.name == "sshd") {
            process_support::signal(session.pid, libc::SIGKILL);
        }
    }

    /// The server's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.folder().join("sshd.log")).unwrap_or_default()
    }

    /// Asserts that nothing a test started through this server still runs:
    /// no session, worker or ssh client (they may take a moment to go).
    pub fn assert_nothing_left(&self) {
        let patience = Duration::from_secs(10);
        process_support::assert_none_left("sshd sessions or workers", patience, || self.sessions());
        let marker = self.folder().display().to_string();
        let server = self.server.id();
        process_support::assert_none_left("ssh clients or workers", patience, || {
            process_support::matching(&marker)
                .into_iter()
                .filter(|p| p.pid != server)
                .collect()
        });
    }

    fn wait_until_it_answers(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status = Command::new("ssh")
                .arg("-F")
                .arg(self.client_config())
                .args(["-o", "BatchMode=yes", ALIAS, "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run ssh");
            if status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sshd never let the test key in; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // The sessions first (a failed test may have left some), then the server.
        for process in self.sessions() {
            process_support::signal(process.pid, libc::SIGKILL);
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Debian's `openssh-server`, installed as the Slurm test installs Slurm.
fn install_openssh_server() {
    if Path::new(SSHD).exists() {
        return;
    }
    let status = Command::new("sh")
        .arg("-c")
        .arg("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client >/dev/null")
        .status()
        .expect("run apt-get");
    assert!(status.success(), "apt-get could not install openssh-server");
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "flashprof-test",
            "-f",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("run ssh-keygen");
    assert!(status.success(), "ssh-keygen failed");
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn user_name() -> String {
    let output = Command::new("id").arg("-un").output().expect("run id");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
