//! A real `flashprof` binary in a pseudo-terminal, for the end-to-end TUI
//! tests: start it, edit its files the ways editors do, read the screen
//! through `vt100` as a user would see it, and check that quitting gives
//! the terminal back.
//!
//! Waits poll the parsed screen until a deadline: sleeps only pace the
//! polling and never decide a result.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

const COLUMNS: u16 = 100;
const WIDE_COLUMNS: u16 = 140;
const ROWS: u16 = 30;
/// Long enough for a debug build's first compile on a busy two-core machine.
const PATIENCE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(25);

pub const STARTER: &str = include_str!("../../kernels/flash-prefill/starter.cu");

/// The starter with line `line` (1-based) passed through `edit`.
pub fn starter_with(line: usize, edit: impl Fn(&str) -> String) -> String {
    let mut text: String = STARTER
        .lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == line { edit(l) } else { l.to_owned() })
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    text
}

/// Writes through the existing inode, as most editors' plain save does.
pub fn save_in_place(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the kernel in place");
}

/// Writes a sibling and renames it over the file, as vim and many IDEs do.
pub fn save_by_rename(path: &Path, text: &str) {
    let tmp = path.with_extension("cu.swp");
    std::fs::write(&tmp, text).expect("write the temporary copy");
    std::fs::rename(&tmp, path).expect("rename it over the kernel");
}

/// The running binary, the terminal it draws on, and everything it wrote.
pub struct Session {
    child: Box<dyn Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    keys: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    output: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

impl Session {
    /// Starts `flashprof ARGS` in `folder`.
    pub fn start(folder: &Path, args: &[&str]) -> Self {
        Self::start_sized(folder, args, &[], COLUMNS)
    }

    /// Starts `flashprof ARGS` in `folder` with `env` added to its
    /// environment, on a terminal wide enough for a header that also names
    /// a remote node and its link.
    pub fn start_with_env(folder: &Path, args: &[&str], env: &[(&str, &Path)]) -> Self {
        Self::start_sized(folder, args, env, WIDE_COLUMNS)
    }

    fn start_sized(folder: &Path, args: &[&str], env: &[(&str, &Path)], columns: u16) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: columns,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pseudo-terminal");
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_flashprof"));
        command.args(args);
        command.cwd(folder);
        command.env("TERM", "xterm-256color");
        for (key, value) in env {
            command.env(key, value);
        }
        let child = pair
            .slave
            .spawn_command(command)
            .expect("start flashprof in the pty");
        // Only the child may hold the slave side, so the reader sees the end
        // of output when the child exits.
        drop(pair.slave);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, columns, 0)));
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut source = pair.master.try_clone_reader().expect("pty reader");
        let (parser, log) = (Arc::clone(&screen), Arc::clone(&output));
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            // Linux reports the closed slave as an error (EIO), others as EOF.
            while let Ok(n @ 1..) = source.read(&mut buffer) {
                parser.lock().expect("parser").process(&buffer[..n]);
                log.lock().expect("log").extend_from_slice(&buffer[..n]);
            }
        });
        let keys = pair.master.take_writer().expect("pty writer");
        Self {
            child,
            master: pair.master,
            keys,
            screen,
            output,
            reader: Some(reader),
        }
    }

    pub fn contents(&self) -> String {
        self.screen.lock().expect("parser").screen().contents()
    }

    /// Polls the screen until `ready` holds, then returns it; panics with
    /// the last screen seen when the deadline passes.
    pub fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.contents();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen was:\n{screen}"
            );
            std::thread::sleep(POLL);
        }
    }

    /// Whether the binary has written `bytes` to the terminal, escape
    /// sequences included (the screen shows only their effect).
    pub fn wrote(&self, bytes: &[u8]) -> bool {
        let output = self.output.lock().expect("log");
        output.windows(bytes.len()).any(|w| w == bytes)
    }

    pub fn press(&mut self, key: &str) {
        self.keys.write_all(key.as_bytes()).expect("send a key");
        self.keys.flush().expect("flush the key");
    }

    /// Waits for the child to exit and for its last output to be parsed.
    pub fn finish(&mut self) -> portable_pty::ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("poll the child") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "flashprof did not exit after q; the screen was:\n{}",
                self.contents()
            );
            std::thread::sleep(POLL);
        };
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the reader thread");
        }
        status
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A failed assertion must not leave the binary running.
        if self.reader.is_some() {
            let _ = self.child.kill();
        }
    }
}

/// Asserts the terminal is as the TUI found it: main screen, cursor shown,
/// no mouse capture, canonical input back on.
pub fn assert_terminal_restored(session: &Session) {
    let terminal = session.screen.lock().expect("parser");
    let screen = terminal.screen();
    assert!(!screen.alternate_screen(), "still on the alternate screen");
    assert!(!screen.hide_cursor(), "the cursor is still hidden");
    assert_eq!(
        screen.mouse_protocol_mode(),
        vt100::MouseProtocolMode::None,
        "mouse capture is still on"
    );
    let output = session.output.lock().expect("log");
    let last = |sequence: &[u8]| output.windows(sequence.len()).rposition(|w| w == sequence);
    let entered = last(b"\x1b[?1049h").expect("the TUI entered the alternate screen");
    let left = last(b"\x1b[?1049l").expect("the TUI left the alternate screen");
    assert!(
        left > entered,
        "the last alternate-screen switch was an enter"
    );
    let termios = session.master.get_termios().expect("the pty's modes");
    assert!(
        termios.local_flags.bits() & libc::ICANON != 0,
        "raw mode was not undone: canonical input is off"
    );
}

/// Saves the starter with an undefined identifier over `kernel`, waits for
/// the compile error on screen, quits and checks the terminal came back:
/// the end of the remote TUI tests, whose worker sits behind a link.
pub fn save_a_typo_then_quit(session: &mut Session, kernel: &Path) {
    save_in_place(kernel, &STARTER.replacen("0.125f", "scale_typo", 1));
    session.wait_for("the compile error", |s| {
        s.lines()
            .next()
            .unwrap_or_default()
            .contains("COMPILE ERROR")
            && s.contains("identifier \"scale_typo\" is undefined")
    });
    session.press("q");
    let status = session.finish();
    assert!(status.success(), "flashprof exited with {status:?}");
    assert_terminal_restored(session);
}
