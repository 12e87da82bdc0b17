//! A student's kernel file, checked and ready for the compiler.
//!
//! A file is checked against one lab. Two forms are accepted. A
//! *translation unit* is a complete `.cu` file, as nvcc would take it, that
//! defines the lab's entry point itself. A *body* is what the lab's editor
//! shows: only the statements inside the kernel, with the lab's shape
//! constants in scope; flashprof wraps it in the entry point's signature. Either way every check that can be made without a
//! compiler is made here, so a wrong file gets a message about the file and
//! not a compiler error about code the student never wrote.
//!
//! This module is pure: [`StudentSource::from_path`] is the only function
//! that touches the file system.

mod host;
mod includes;
mod prelude;
mod scan;

use crate::display::line_for_display;
use std::path::Path;

use self::scan::{find_kernels, tokenize, KernelDecl, Token, TokenKind};
use super::definition::LabRef;
use super::geometry::{declared_lab, GeometryError, LaunchGeometry};

pub use self::host::DroppedHostCode;
pub use self::prelude::{StandInHeader, CUDA_TYPE_HEADERS, PRELUDE_FILE, STAND_IN_HEADERS};

/// Largest accepted source file. Real kernels are a few KiB; anything near
/// this is a wrong file, and refusing it early keeps NVRTC from chewing on it.
pub const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// How the student wrote the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceForm {
    /// A whole `.cu` file defining the lab's entry point.
    TranslationUnit,
    /// Only the kernel's statements, as in the lab's editor.
    Body,
}

/// Why a path through `link` is not read, in the words `check`, `grade` and
/// the TUI share (after the path they name).
pub fn untrusted_link_reason(link: &str) -> String {
    format!(
        "not read: {link}; only your own or root's links, in folders no one else can write, are \
         followed (docs/SECURITY.md)"
    )
}

/// Why a file cannot be used as a kernel source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: no such file")]
    Missing { path: String },
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
    #[error("{path}: is {kind}, not a regular file: not read")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path}: cannot be read: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{path}: {}", untrusted_link_reason(.link))]
    UntrustedLink { path: String, link: String },
    #[error("{path}: {size} bytes is more than the {limit}-byte limit for a kernel source")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("{path}: has no code (only whitespace or comments)")]
    Empty { path: String },
    #[error("{path}: looks like a binary file (NUL byte at byte offset {offset}, line {line})")]
    Binary {
        path: String,
        offset: usize,
        line: usize,
    },
    #[error("{path}: is not UTF-8 text (invalid byte at byte offset {offset}, line {line})")]
    NotUtf8 {
        path: String,
        offset: usize,
        line: usize,
    },
    #[error(
        "{path}:{line}: defines kernel `{name}`, but the lab launches `{entry}`\n  \
         found:    {found}\n  expected: {expected}"
    )]
    WrongEntryName {
        path: String,
        line: usize,
        name: String,
        entry: &'static str,
        found: String,
        expected: &'static str,
    },
    #[error("{path}:{line}: `{entry}` {problem}\n  found:    {found}\n  expected: {expected}")]
    WrongSignature {
        path: String,
        line: usize,
        entry: &'static str,
        problem: String,
        found: String,
        expected: &'static str,
    },
    /// Only the caller knows whether `--lab` chose `chosen` (and so
    /// whether dropping it is the fix): the message states the facts.
    #[error(
        "{path}:{line}: the file declares lab `{declared}`, but it is being checked as `{chosen}`"
    )]
    WrongLab {
        path: String,
        line: usize,
        declared: String,
        chosen: &'static str,
    },
    #[error("{path}:{line}:{column}: error: `{text}` is refused: {reason}\n{excerpt}")]
    RefusedInclude {
        path: String,
        line: usize,
        column: usize,
        text: String,
        reason: String,
        /// The refused line and a caret under it ([`excerpt`]).
        excerpt: String,
    },
    /// Host code flashprof cannot leave out (see [`host`]).
    #[error("{path}:{line}: {message}")]
    HostCode {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {source}")]
    Geometry { path: String, source: GeometryError },
}

/// The 1-based column where `refused` (a directive, on one logical line)
/// starts in `line`: its first word, else the line's first non-blank.
fn column_of(line: &str, refused: &str) -> usize {
    let first_word = refused.split_whitespace().next().unwrap_or(refused);
    let at = line
        .find(first_word)
        .or_else(|| line.find(|c: char| !c.is_whitespace()))
        .unwrap_or(0);
    line[..at].chars().count() + 1
}

/// Line `number` of a file as every error shows it (`   26 | text`, made
/// safe for a terminal), then a caret under the 1-based char `column`. The
/// caret's indent is measured on the shown text, so a tab (shown as spaces)
/// or a control character (shown as `^[`) before it never moves it off.
pub fn excerpt(number: usize, text: &str, column: Option<usize>) -> Vec<String> {
    let gutter = format!("{number:>5} | ");
    let mut lines = vec![format!("{gutter}{}", line_for_display(text))];
    if let Some(column) = column {
        let before: String = text.chars().take(column.saturating_sub(1)).collect();
        let indent = gutter.len() + line_for_display(&before).chars().count();
        lines.push(format!("{}^", " ".repeat(indent)));
    }
    lines
}

/// A validated kernel source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StudentSource {
    lab: LabRef,
    display_path: String,
    text: String,
    form: SourceForm,
    geometry: LaunchGeometry,
    /// Prelude names the file defines itself (see [`prelude::prelude_for`]).
    self_defined: Vec<&'static str>,
    /// The text NVRTC compiles: `text` with host-only code blanked, line
    /// for line (see [`host`]).
    device_text: String,
    /// What was blanked.
    dropped: Vec<DroppedHostCode>,
    /// The [`CUDA_TYPE_HEADERS`] the file includes.
    cuda_headers: Vec<&'static str>,
}

/// What NVRTC is given for one student file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedSource {
    /// The full program text: prelude, `#line` markers and the student's text.
    pub text: String,
    /// NVRTC's program name, the name in the `#line` marker too:
    /// [`StudentSource::marker_name`].
    pub program_name: String,
    /// Headers to hand NVRTC alongside the program.
    pub headers: &'static [StandInHeader],
    /// The [`CUDA_TYPE_HEADERS`] the file includes: the compiler needs the
    /// real ones for them (a stand-in only covers `cuda_fp16.h`).
    pub cuda_headers: Vec<&'static str>,
    /// The symbol the compiled image must export.
    pub entry_point: &'static str,
}

/// The name NVRTC is given for a file shown as `display_path`
/// ([`StudentSource::marker_name`]), for a caller that has the path but
/// not the checked source.
pub fn marker_name(display_path: &str) -> String {
    display_path
        .chars()
        .map(|c| match c {
            '"' | '\\' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect()
}

impl StudentSource {
    /// Reads and checks the file at `path` for `lab`, shown to the user as given.
    /// A FIFO, socket or device node is refused without blocking on it, and
    /// so is a path through a link another user owns or can replace
    /// ([`crate::sys::trust::check_links`]).
    pub fn from_path(path: &Path, lab: LabRef) -> Result<Self, SourceError> {
        use std::os::unix::fs::MetadataExt;
        let shown = path.display().to_string();
        // A link another user made or can swap would reach the TA's files.
        let untrusted = |link| SourceError::UntrustedLink {
            path: shown.clone(),
            link,
        };
        // Nothing there when checked: a file made after the check is not read.
        let Some(checked) = crate::sys::trust::check_links(path).map_err(untrusted)? else {
            return Err(SourceError::Missing { path: shown });
        };
        // The file opened must be the one the walk arrived at.
        let (file, size) = open_regular(path, path, FollowLinks::Yes)?;
        let opened = file.metadata().map_err(|error| unreadable(path, error))?;
        if checked != (opened.dev(), opened.ino()) {
            return Err(untrusted(format!(
                "{shown} changed while its links were checked"
            )));
        }
        let read = read_open(file, size, path, MAX_SOURCE_BYTES)?;
        // Checked on the size the file claims, so a huge file is never loaded.
        check_size(&shown, read.size.max(read.bytes.len() as u64))?;
        Self::from_bytes(&shown, &read.bytes, lab)
    }

    /// Checks `bytes` as the contents of a file shown as `display_path`, for `lab`.
    pub fn from_bytes(display_path: &str, bytes: &[u8], lab: LabRef) -> Result<Self, SourceError> {
        let path = display_path.to_owned();
        check_size(&path, bytes.len() as u64)?;
        if let Some(offset) = bytes.iter().position(|&b| b == 0) {
            let line = line_of_offset(bytes, offset);
            return Err(SourceError::Binary { path, offset, line });
        }
        let text = std::str::from_utf8(bytes).map_err(|error| {
            let offset = error.valid_up_to();
            let line = line_of_offset(bytes, offset);
            SourceError::NotUtf8 {
                path: path.clone(),
                offset,
                line,
            }
        })?;
        // Editors on Windows may save a byte-order mark; it is not code. All
        // leading marks go, so the text kept validates again unchanged.
        let text = text.trim_start_matches('\u{feff}');
        let tokens = tokenize(text);
        if tokens.is_empty() {
            return Err(SourceError::Empty { path });
        }
        if let Some(refused) = includes::first_refused(&tokens) {
            let shown = text
                .lines()
                .nth(refused.line.saturating_sub(1))
                .unwrap_or("");
            let column = column_of(shown, &refused.text);
            return Err(SourceError::RefusedInclude {
                excerpt: excerpt(refused.line, shown, Some(column)).join("\n"),
                path,
                line: refused.line,
                column,
                text: refused.text,
                reason: refused.reason,
            });
        }
        if let Some((line, declared)) = declared_lab(text) {
            if declared != lab.name() {
                return Err(SourceError::WrongLab {
                    path,
                    line,
                    declared,
                    chosen: lab.name(),
                });
            }
        }
        let kernels = find_kernels(&tokens);
        let form = if kernels.is_empty() {
            SourceForm::Body
        } else {
            check_entry_point(&path, text, &kernels, lab)?;
            SourceForm::TranslationUnit
        };
        let (device_text, dropped) = match form {
            SourceForm::Body => (text.to_owned(), Vec::new()),
            SourceForm::TranslationUnit => {
                host::device_side(text, &tokens).map_err(|refusal| SourceError::HostCode {
                    path: path.clone(),
                    line: refusal.line,
                    message: refusal.message,
                })?
            }
        };
        let geometry = lab
            .declared_geometry(text)
            .map_err(|source| SourceError::Geometry {
                path: path.clone(),
                source,
            })?;
        let self_defined = prelude::definitions(lab)
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| defines(&tokens, name, form))
            .collect();
        Ok(Self {
            lab,
            display_path: path,
            text: text.to_owned(),
            form,
            geometry,
            self_defined,
            device_text,
            dropped,
            cuda_headers: includes::cuda_type_headers(&tokens),
        })
    }

    /// The lab the file was checked against.
    pub fn lab(&self) -> LabRef {
        self.lab
    }

    /// The path as the user should see it in messages.
    pub fn display_path(&self) -> &str {
        &self.display_path
    }

    /// The name NVRTC is given for the file (program name and `#line`
    /// marker): the display path with `"`, `\` and control characters as
    /// `_`. NVRTC writes both into the PTX unescaped (`.file` with
    /// `-lineinfo`), where a quote or a line break in a file name broke the
    /// compile; diagnostics naming it are given back the display path.
    pub fn marker_name(&self) -> String {
        marker_name(&self.display_path)
    }

    /// The student's text, without any byte-order mark.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn form(&self) -> SourceForm {
        self.form
    }

    /// The host-only parts of the file that are not compiled (its `main`,
    /// launch code, host helpers), in file order.
    pub fn dropped_host_code(&self) -> &[DroppedHostCode] {
        &self.dropped
    }

    /// The launch geometry the file declares, or the lab default.
    pub fn geometry(&self) -> LaunchGeometry {
        self.geometry
    }

    /// The student's line `line` (1-based), for showing next to a diagnostic.
    pub fn line(&self, line: usize) -> Option<&str> {
        self.text.lines().nth(line.checked_sub(1)?)
    }

    /// The program NVRTC compiles. `#line` markers make every diagnostic in
    /// the student's text name the student's path and line; a body is
    /// wrapped in the entry point's signature first.
    pub fn prepared(&self) -> PreparedSource {
        let mut text = prelude::prelude_for(self.lab, |name| self.self_defined.contains(&name));
        if self.form == SourceForm::Body {
            text.push_str(self.lab.abi().signature);
            text.push_str(" {\n");
        }
        text.push_str(&prelude::line_marker(1, &self.marker_name()));
        text.push_str(&self.device_text);
        if !self.device_text.ends_with('\n') {
            text.push('\n');
        }
        if self.form == SourceForm::Body {
            text.push_str("}\n");
        }
        PreparedSource {
            text,
            program_name: self.marker_name(),
            headers: STAND_IN_HEADERS,
            cuda_headers: self.cuda_headers.clone(),
            entry_point: self.lab.abi().entry_point,
        }
    }
}

/// Whether [`read_regular_file`] follows a symlink at the last component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowLinks {
    Yes,
    /// Refuse a symlink (`O_NOFOLLOW`): for a path already seen not to be one.
    No,
}

/// What [`read_regular_file`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedRead {
    /// At most `limit + 1` bytes, so a caller can tell the file went past the limit.
    pub bytes: Vec<u8>,
    /// The size the open file reported.
    pub size: u64,
}

/// What a file that is not a regular one is, for messages.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "a device node"
    } else if file_type.is_symlink() {
        "a symlink"
    } else {
        "an unknown kind of file"
    }
}

/// Reads a file that may be hostile without ever blocking on it: its type is
/// checked before opening, it is opened with `O_NONBLOCK` (so opening a FIFO
/// returns at once), the open descriptor is checked again to be a regular
/// file (it may have been swapped in between), and no more than `limit + 1`
/// bytes are read.
pub fn read_regular_file(
    path: &Path,
    follow: FollowLinks,
    limit: u64,
) -> Result<BoundedRead, SourceError> {
    read_regular_file_named(path, path, follow, limit)
}

/// [`read_regular_file`] of `path`, its messages naming the file `name`
/// (a path through an open folder, `/proc/self/fd/N/x.cu`, means nothing
/// to the person reading them).
pub fn read_regular_file_named(
    path: &Path,
    name: &Path,
    follow: FollowLinks,
    limit: u64,
) -> Result<BoundedRead, SourceError> {
    let (file, size) = open_regular(path, name, follow)?;
    read_open(file, size, name, limit)
}

/// The file `pinned` names, read as [`read_regular_file`] reads (never
/// through a link at its last component), through its folder as it was when
/// pinned: a folder swapped since is refused ([`crate::sys::pinned`]).
/// Messages name the file `shown`.
pub fn read_pinned_file(
    pinned: &crate::sys::pinned::PinnedFolder,
    shown: &Path,
    limit: u64,
) -> Result<BoundedRead, SourceError> {
    let opened = pinned.open().map_err(|error| unreadable(shown, error))?;
    read_regular_file_named(&opened.file(), shown, FollowLinks::No, limit)
}

/// At most `limit + 1` bytes of an open `file` of `size` bytes, so a caller
/// can tell it went past the limit.
fn read_open(
    file: std::fs::File,
    size: u64,
    name: &Path,
    limit: u64,
) -> Result<BoundedRead, SourceError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| unreadable(name, error))?;
    Ok(BoundedRead { bytes, size })
}

/// The last `limit` bytes of a hostile file (all of it when it is no
/// longer), read as [`read_regular_file`] reads, never through a link: for
/// a log whose newest lines are the ones worth keeping.
pub fn read_regular_file_tail(
    path: &Path,
    name: &Path,
    limit: u64,
) -> Result<BoundedRead, SourceError> {
    use std::io::{Read, Seek, SeekFrom};
    let (mut file, size) = open_regular(path, name, FollowLinks::No)?;
    file.seek(SeekFrom::Start(size.saturating_sub(limit)))
        .map_err(|error| unreadable(name, error))?;
    let mut bytes = Vec::new();
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|error| unreadable(name, error))?;
    Ok(BoundedRead { bytes, size })
}

fn unreadable(name: &Path, error: std::io::Error) -> SourceError {
    SourceError::Unreadable {
        path: name.display().to_string(),
        reason: error.to_string(),
    }
}

/// `path` opened for reading, checked to be a regular file before and
/// after opening, without blocking; with the size the open file reports.
fn open_regular(
    path: &Path,
    name: &Path,
    follow: FollowLinks,
) -> Result<(std::fs::File, u64), SourceError> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = name.display().to_string();
    let not_regular = |file_type: std::fs::FileType| SourceError::NotRegular {
        path: shown.clone(),
        kind: kind_of(file_type),
    };
    let metadata = match follow {
        FollowLinks::Yes => std::fs::metadata(path),
        FollowLinks::No => std::fs::symlink_metadata(path),
    }
    .map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => SourceError::Missing {
            path: shown.clone(),
        },
        _ => unreadable(name, error),
    })?;
    if metadata.file_type().is_dir() {
        return Err(SourceError::NotAFile { path: shown });
    }
    if !metadata.file_type().is_file() {
        return Err(not_regular(metadata.file_type()));
    }
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    if follow == FollowLinks::No {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => SourceError::NotRegular {
                path: shown.clone(),
                kind: "a symlink",
            },
            _ => unreadable(name, error),
        })?;
    let opened = file.metadata().map_err(|error| unreadable(name, error))?;
    if !opened.file_type().is_file() {
        return Err(not_regular(opened.file_type()));
    }
    Ok((file, opened.len()))
}

fn check_size(path: &str, size: u64) -> Result<(), SourceError> {
    if size > MAX_SOURCE_BYTES {
        return Err(SourceError::TooLarge {
            path: path.to_owned(),
            size,
            limit: MAX_SOURCE_BYTES,
        });
    }
    Ok(())
}

fn line_of_offset(bytes: &[u8], offset: usize) -> usize {
    1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count()
}

/// Whether the file defines `name` in a way the prelude's definition would
/// clash with: as a macro anywhere, or (in a whole file) as something
/// initialised at file scope. A body's own `const int DH = 64;` sits inside
/// the kernel and merely shadows the prelude, so it does not count.
fn defines(tokens: &[Token], name: &str, form: SourceForm) -> bool {
    let mut depth = 0usize;
    tokens.iter().enumerate().any(|(i, token)| {
        match token.text {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            _ => {}
        }
        if token.kind == TokenKind::Directive {
            return defined_macro(token.text) == Some(name);
        }
        let initialised = tokens.get(i + 1).is_some_and(|t| t.text == "=")
            && tokens.get(i + 2).is_none_or(|t| t.text != "=");
        form == SourceForm::TranslationUnit && depth == 0 && token.text == name && initialised
    })
}

/// The macro a `#define` line defines.
fn defined_macro(directive: &str) -> Option<&str> {
    let rest = directive.strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("define")?;
    let rest = rest.strip_prefix([' ', '\t'])?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Words that name a type, so a parameter's last word is its name only when
/// it is not one of these.
const TYPE_WORDS: [&str; 10] = [
    "float", "double", "int", "unsigned", "signed", "long", "short", "char", "bool", "void",
];

/// Qualifiers that do not change what a launch passes, so they are not
/// compared: `const float*` and `float* __restrict__` are the same argument.
const IGNORED_QUALIFIERS: [&str; 5] = [
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
];

/// A parameter's type with its name and ignorable qualifiers removed,
/// written compactly (`float*`).
fn parameter_type(tokens: &[&str]) -> String {
    let mut kept: Vec<&str> = tokens
        .iter()
        .copied()
        .filter(|t| !IGNORED_QUALIFIERS.contains(t))
        .collect();
    if let [_, .., last] = kept[..] {
        let is_name = last.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && !TYPE_WORDS.contains(&last);
        if is_name {
            kept.pop();
        }
    }
    let mut written = String::new();
    for token in kept {
        if !written.is_empty() && !matches!(token, "*" | "&") {
            written.push(' ');
        }
        written.push_str(token);
    }
    written
}

/// The parameter types the lab launches with, read from the lab's own
/// signature so the two can never drift apart.
fn expected_parameter_types(signature: &str) -> Vec<String> {
    let tokens = tokenize(signature);
    find_kernels(&tokens)
        .first()
        .map(|entry| entry.params.iter().map(|p| parameter_type(p)).collect())
        .unwrap_or_default()
}

fn check_entry_point(
    path: &str,
    text: &str,
    kernels: &[KernelDecl],
    lab: LabRef,
) -> Result<(), SourceError> {
    let abi = lab.abi();
    let shown = |kernel: &KernelDecl| {
        let (first, last) = kernel.lines;
        text.lines()
            .skip(first - 1)
            .take(last + 1 - first)
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let entries: Vec<&KernelDecl> = kernels
        .iter()
        .filter(|k| k.name == abi.entry_point)
        .collect();
    if entries.is_empty() {
        let first = &kernels[0];
        return Err(SourceError::WrongEntryName {
            path: path.to_owned(),
            line: first.line,
            name: first.name.to_owned(),
            entry: abi.entry_point,
            found: shown(first),
            expected: abi.signature,
        });
    }
    let expected = expected_parameter_types(abi.signature);
    for entry in entries {
        if let Some(problem) = signature_problem(entry, &expected) {
            return Err(SourceError::WrongSignature {
                path: path.to_owned(),
                line: entry.line,
                entry: abi.entry_point,
                problem,
                found: shown(entry),
                expected: abi.signature,
            });
        }
    }
    Ok(())
}

fn signature_problem(entry: &KernelDecl, expected: &[String]) -> Option<String> {
    if !entry.c_linkage {
        return Some(
            "is not declared extern \"C\", so its symbol name is mangled and the launcher cannot find it"
                .into(),
        );
    }
    let found: Vec<String> = entry.params.iter().map(|p| parameter_type(p)).collect();
    if found.len() != expected.len() {
        return Some(format!(
            "takes {} parameters; the lab passes {}",
            found.len(),
            expected.len()
        ));
    }
    let (index, (got, want)) = found
        .iter()
        .zip(expected)
        .enumerate()
        .find(|(_, (got, want))| got != want)?;
    Some(format!(
        "parameter {} is `{got}`, but the lab passes `{want}`",
        index + 1
    ))
}

#[cfg(test)]
mod tests;
