//! Terminal setup and restore. The terminal is put back however the TUI
//! ends: normal return, error, or panic (a hook restores it before the
//! panic message prints, so the message is readable). Ctrl-C needs no
//! signal handler: in raw mode it arrives as a key, which quits.
//!
//! It also writes the one sequence the screen's frames do not carry: text
//! for the terminal's clipboard (OSC 52).

use std::io::{self, Stdout, Write};
use std::sync::Once;

use crossterm::cursor::{Hide, Show};
use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// The terminal in TUI mode; dropping it restores the terminal.
pub struct TerminalSession {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalSession {
    pub fn enter() -> io::Result<Self> {
        install_panic_hook();
        let entered = enable_raw_mode()
            .and_then(|()| execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture, Hide));
        if let Err(e) = entered {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(io::stdout())) {
            Ok(terminal) => Ok(Self { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalSession {
    fn drop(&mut self) {
        restore();
    }
}

/// Best effort: each step is tried even if an earlier one failed.
fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        Show
    );
}

fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Puts `text` on the clipboard of the terminal the TUI draws on, when the
/// terminal honours OSC 52 (tmux passes it on with `set-clipboard`); none
/// answers whether it did, so the screen shows the text as well.
pub fn copy_to_clipboard(text: &str) {
    let mut out = io::stdout();
    let _ = out
        .write_all(clipboard_sequence(text).as_bytes())
        .and_then(|()| out.flush());
}

/// The OSC 52 sequence that sets the clipboard to `text`. Base64 keeps any
/// byte of it from reaching the terminal as a control.
pub fn clipboard_sequence(text: &str) -> String {
    format!("\x1b]52;c;{}\x07", crate::base64::encode(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clipboard_sequence_carries_no_control_but_its_frame() {
        let sequence = clipboard_sequence("flashprof check 'a\x1b]0;x\x07.cu'");
        let body = &sequence["\x1b]52;c;".len()..sequence.len() - 1];
        assert!(sequence.starts_with("\x1b]52;c;") && sequence.ends_with('\x07'));
        assert!(body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c)));
    }
}
