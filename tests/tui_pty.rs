//! End to end: the real `flashprof` binary in a pseudo-terminal, watching a
//! copy of the starter kernel while the test edits it the ways editors do.
//!
//! Everything between a save and the screen is real here: the folder watch
//! and its debounce, NVRTC, the engine thread, the redraw, the key reader
//! and the terminal restore. Only the GPU is missing on a machine without
//! one, which the screen must say; with one, timing and counters are
//! switched off so the test stays about the loop, not the kernel. The
//! screen is read through `vt100`, so assertions see what a user would.
//!
//! Waits poll the parsed screen until a deadline: the sleeps here only pace
//! the polling and the burst of saves, and never decide a result.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

const COLUMNS: u16 = 100;
const ROWS: u16 = 30;
/// Long enough for a debug build's first compile on a busy two-core machine.
const PATIENCE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(25);

const STARTER: &str = include_str!("../kernels/starter.cu");

/// The starter with line `line` (1-based) passed through `edit`.
fn starter_with(line: usize, edit: impl Fn(&str) -> String) -> String {
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
fn save_in_place(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the kernel in place");
}

/// Writes a sibling and renames it over the file, as vim and many IDEs do.
fn save_by_rename(path: &Path, text: &str) {
    let tmp = path.with_extension("cu.swp");
    std::fs::write(&tmp, text).expect("write the temporary copy");
    std::fs::rename(&tmp, path).expect("rename it over the kernel");
}

/// The running binary, the terminal it draws on, and everything it wrote.
struct Session {
    child: Box<dyn Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    keys: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    output: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

impl Session {
    fn start(kernel: &Path) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLUMNS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pseudo-terminal");
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_flashprof"));
        command.arg(kernel);
        command.args(["--no-timing", "--no-counters"]);
        command.cwd(kernel.parent().expect("kernel in a folder"));
        command.env("TERM", "xterm-256color");
        let child = pair
            .slave
            .spawn_command(command)
            .expect("start flashprof in the pty");
        // Only the child may hold the slave side, so the reader sees the end
        // of output when the child exits.
        drop(pair.slave);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLUMNS, 0)));
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

    fn contents(&self) -> String {
        self.screen.lock().expect("parser").screen().contents()
    }

    /// Polls the screen until `ready` holds, then returns it; panics with
    /// the last screen seen when the deadline passes.
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
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

    fn press(&mut self, key: &str) {
        self.keys.write_all(key.as_bytes()).expect("send a key");
        self.keys.flush().expect("flush the key");
    }

    /// Waits for the child to exit and for its last output to be parsed.
    fn finish(&mut self) -> portable_pty::ExitStatus {
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

/// The first line of the screen: the file, the verdict, and the GPU.
fn header(screen: &str) -> &str {
    screen.lines().next().unwrap_or_default()
}

/// Settled: nothing compiling or queued, and the result is of the newest text.
fn settled(screen: &str) -> bool {
    let top = header(screen);
    !top.contains("...") && !top.contains("previous save") && !top.contains("waits")
}

fn compile_error_on(screen: &str, line: usize, identifier: &str) -> bool {
    settled(screen)
        && header(screen).contains("COMPILE ERROR")
        && screen.contains(&format!("error line {line}:"))
        && screen.contains(&format!("identifier \"{identifier}\" is undefined"))
}

#[test]
fn edits_in_a_real_terminal_reach_the_screen_and_quit_restores_it() {
    if !flashprof::gpu::libraries::preload_nvrtc() {
        eprintln!("skipping: NVRTC (libnvrtc.so.13) cannot be loaded, so nothing would compile");
        return;
    }
    let folder = tempfile::tempdir().expect("temp folder");
    let kernel: PathBuf = folder.path().join("prefill.cu");
    save_in_place(&kernel, STARTER);
    let mut session = Session::start(&kernel);
    session.wait_for("the starter to compile", |s| {
        settled(s) && s.contains("compiled in")
    });

    // Line 19 declares the query row pointer; a typo in its type.
    save_in_place(
        &kernel,
        &starter_with(19, |l| l.replacen("const float*", "const flaot*", 1)),
    );
    session.wait_for("the in-place error on line 19", |s| {
        compile_error_on(s, 19, "flaot")
    });

    save_by_rename(&kernel, STARTER);
    let fixed = session.wait_for("the renamed-over fix to compile", |s| {
        settled(s) && s.contains("compiled in") && !s.contains("COMPILE ERROR")
    });
    assert!(
        header(&fixed).contains("no GPU") || header(&fixed).contains("PASS 14/14"),
        "a compiled starter either passes or says no GPU:\n{fixed}"
    );

    // Line 29 scales the score; each save names a different undefined scale.
    for save in 0..10 {
        let text = starter_with(29, |l| l.replacen("0.125f", &format!("scale{save}"), 1));
        if save % 2 == 0 {
            save_in_place(&kernel, &text);
        } else {
            save_by_rename(&kernel, &text);
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    let burst = session.wait_for("the last save of the burst", |s| {
        compile_error_on(s, 29, "scale9")
    });
    for earlier in 0..9 {
        assert!(
            !burst.contains(&format!("scale{earlier}")),
            "save {earlier} of the burst is still on screen:\n{burst}"
        );
    }

    session.press("q");
    let status = session.finish();
    assert!(status.success(), "flashprof exited with {status:?}");
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
