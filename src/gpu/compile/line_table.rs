//! Where each SASS instruction of a cubin comes from: file, line and the
//! chain of calls it was inlined through.
//!
//! NVRTC with `-lineinfo` puts a DWARF (version 2) line program in the
//! cubin's `.debug_line`: one sequence per function, its rows mapping code
//! offsets to file and line. Inlining is carried by one record DWARF does
//! not define, NVIDIA's extended opcode `0x90` ("enhanced lineinfo"), with
//! two ULEB128 operands:
//!
//! 1. the 1-based index, among the rows of the current sequence so far,
//!    of the row of the call the following rows were inlined at (0: not
//!    inlined);
//! 2. the `.debug_str` offset of the inlined function's (mangled) name.
//!
//! It sets a register of the state machine, kept by every row after it
//! until the next `0x90` (`0 0` resets it). This was read off NVRTC 13.0's
//! output against the PTX it compiled from, whose `.loc` directives carry
//! the same chain in words (`.loc 2 1684 13, function_name $L__info_string0,
//! inlined_at 1 10 5`); the tests check it on a kernel whose chain is known.
//! gimli parses the header and the instructions and runs the standard state
//! machine; only that one record is read here.
//!
//! Each sequence starts with `DW_LNE_set_address 0` that the cubin's
//! `.rela.debug_line` relocates to its function, one relocation per
//! sequence in order: that is how a sequence is tied to its function.

use std::collections::HashMap;

use gimli::{DebugLine, DebugLineOffset, EndianSlice, LineInstruction, LineRow, LittleEndian};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SymbolKind};

/// NVIDIA's extended line-program opcode for the inlined-at context.
const DW_LNE_NV_INLINED_AT: u8 = 0x90;

/// The width of one SASS instruction from Volta on.
pub const SASS_INSTRUCTION_BYTES: u64 = 16;

/// One frame of where an instruction comes from, innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The file's path as the line program gives it: the name NVRTC was
    /// given (the student's marker name, flashprof's prelude), after the
    /// compiling process's folder when that name is relative, or a
    /// header's path.
    pub file: String,
    pub line: u32,
    /// The function this frame's code was inlined from (mangled), for
    /// every frame but the outermost.
    pub inlined_function: Option<String>,
}

/// A row of a function's sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    /// Bytes from the start of the function.
    offset: u64,
    file: usize,
    line: u32,
    /// The index in [`LineTable::rows`] of the row of the call this row
    /// was inlined at.
    call: Option<usize>,
    inlined_function: Option<String>,
}

/// The line table of one cubin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineTable {
    files: Vec<String>,
    /// Every row of the program in order (the inlined-at indices point here).
    rows: Vec<Row>,
    /// Each function's rows, as ranges of [`Self::rows`], with its code size.
    functions: HashMap<String, Function>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    /// Indices into `rows`, by offset (ties kept in program order).
    rows: Vec<usize>,
    code_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineTableError {
    #[error("the image is not a cubin: {0}")]
    NotElf(String),
    #[error("the cubin has no line table (was it compiled without -lineinfo?)")]
    NoLineTable,
    #[error("the cubin's line table cannot be read: {0}")]
    Unreadable(String),
}

impl LineTable {
    /// Reads the line table of `cubin`.
    pub fn from_cubin(cubin: &[u8]) -> Result<Self, LineTableError> {
        let file = object::File::parse(cubin).map_err(|e| LineTableError::NotElf(e.to_string()))?;
        let section = file
            .section_by_name(".debug_line")
            .ok_or(LineTableError::NoLineTable)?;
        let data = section
            .data()
            .map_err(|e| LineTableError::Unreadable(e.to_string()))?;
        let strings = file
            .section_by_name(".debug_str")
            .and_then(|s| s.data().ok())
            .unwrap_or_default();
        let unreadable = |what: String| LineTableError::Unreadable(what);
        // The function each sequence belongs to, in the order of the
        // sequences' `set_address` records.
        let mut relocations: Vec<(u64, String)> = section
            .relocations()
            .map(|(at, relocation)| {
                let name = match relocation.target() {
                    RelocationTarget::Symbol(index) => file
                        .symbol_by_index(index)
                        .ok()
                        .and_then(|s| function_named(&file, &s)),
                    _ => None,
                };
                name.map(|name| (at, name))
                    .ok_or_else(|| unreadable(format!("a relocation at {at:#x} names no function")))
            })
            .collect::<Result<_, _>>()?;
        relocations.sort_by_key(|(at, _)| *at);
        let code_bytes: HashMap<String, u64> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
            .filter_map(|s| Some((s.name().ok()?.to_owned(), s.size())))
            .collect();

        let program = DebugLine::new(data, LittleEndian)
            .program(DebugLineOffset(0), 8, None, None)
            .map_err(|e| unreadable(format!("its header: {e}")))?;
        let header = program.header().clone();
        let files = (1..=header.file_names().len() as u64)
            .map(|index| file_path(&header, index))
            .collect();
        let mut table = LineTable {
            files,
            ..Self::default()
        };
        let mut sequences = relocations.into_iter().map(|(_, name)| name);
        let mut current: Option<String> = None;
        // Where the current sequence's rows start in `table.rows`: the
        // inlined-at indices count from there.
        let mut sequence_start = 0;
        let mut call: Option<usize> = None;
        let mut inlined_function: Option<String> = None;
        let mut row = LineRow::new(&header);
        let mut instructions = header.instructions();
        let mut program = program;
        while let Some(instruction) = instructions
            .next_instruction(&header)
            .map_err(|e| unreadable(e.to_string()))?
        {
            match instruction {
                LineInstruction::UnknownExtended(opcode, mut operands)
                    if opcode.0 == DW_LNE_NV_INLINED_AT =>
                {
                    let index = operands.read_uleb128_u64(&unreadable)?;
                    let name = operands.read_uleb128_u64(&unreadable)?;
                    let seen = table.rows.len() - sequence_start;
                    call = match usize::try_from(index) {
                        Ok(0) => None,
                        Ok(n) if n <= seen => Some(sequence_start + n - 1),
                        _ => {
                            return Err(unreadable(format!(
                                "an inlined-at row {index} of a sequence of {seen} rows so far"
                            )))
                        }
                    };
                    inlined_function = call.map(|_| string_at(strings, name));
                }
                LineInstruction::SetAddress(_) => {
                    current = Some(sequences.next().ok_or_else(|| {
                        unreadable("more sequences than relocated addresses".into())
                    })?);
                    row.execute(instruction, &mut program)
                        .map_err(|e| unreadable(e.to_string()))?;
                }
                instruction => {
                    let ends = matches!(instruction, LineInstruction::EndSequence);
                    let emits = row
                        .execute(instruction, &mut program)
                        .map_err(|e| unreadable(e.to_string()))?;
                    if emits {
                        let name = current
                            .clone()
                            .ok_or_else(|| unreadable("a row before any address".into()))?;
                        table.push(
                            &name,
                            Row {
                                offset: row.address(),
                                file: row.file_index() as usize,
                                line: row.line().map_or(0, |l| l.get() as u32),
                                call,
                                inlined_function: inlined_function.clone(),
                            },
                            ends,
                        );
                    }
                    if ends {
                        row.reset(&header);
                        sequence_start = table.rows.len();
                        current = None;
                        call = None;
                        inlined_function = None;
                    }
                }
            }
        }
        for (name, function) in &mut table.functions {
            function.code_bytes = code_bytes.get(name).copied().unwrap_or(0);
            let rows = &table.rows;
            function.rows.sort_by_key(|&i| rows[i].offset);
        }
        Ok(table)
    }

    fn push(&mut self, function: &str, row: Row, ends_sequence: bool) {
        let index = self.rows.len();
        self.rows.push(row);
        // The end row only closes the last range; it places no code.
        if !ends_sequence {
            self.functions
                .entry(function.to_owned())
                .or_insert_with(|| Function {
                    rows: Vec::new(),
                    code_bytes: 0,
                })
                .rows
                .push(index);
        }
    }

    /// The functions the table covers, with their code sizes in bytes.
    pub fn functions(&self) -> impl Iterator<Item = (&str, u64)> {
        self.functions
            .iter()
            .map(|(name, f)| (name.as_str(), f.code_bytes))
    }

    /// Where the instruction at `offset` bytes into `function` comes from,
    /// innermost frame first; `None` when the table does not place it.
    /// Where several rows share an address the last one holds (the earlier
    /// ones cover no code).
    pub fn frames(&self, function: &str, offset: u64) -> Option<Vec<Frame>> {
        let rows = &self.functions.get(function)?.rows;
        let after = rows.partition_point(|&i| self.rows[i].offset <= offset);
        let mut index = Some(*rows.get(after.checked_sub(1)?)?);
        let mut frames = Vec::new();
        while let Some(at) = index {
            let row = &self.rows[at];
            frames.push(Frame {
                file: self.files.get(row.file.checked_sub(1)?)?.clone(),
                line: row.line,
                inlined_function: row.inlined_function.clone(),
            });
            // A call row always comes before the rows inlined at it.
            index = row.call.filter(|&call| call < at);
        }
        Some(frames)
    }
}

/// Which line of the student's file an instruction is charged to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attribution {
    /// A line of the student's file: the innermost frame of the chain in
    /// that file, so a header intrinsic's code is charged to the student's
    /// line that calls it, and a helper of the student's to its own line.
    /// `through` names the inner frames (headers) passed on the way.
    Student { line: u32, through: Vec<Frame> },
    /// Code of flashprof's own (the prelude, a body's wrapper) or of a
    /// header reached from no line of the student's.
    Own,
}

/// Charges `frames` (innermost first) to the student's file, which NVRTC
/// was given as `student` and which has `lines` lines: a line past its end
/// is flashprof's (a body's closing wrapper follows the student's text).
pub fn attribute(frames: &[Frame], student: &str, lines: u32) -> Attribution {
    match frames
        .iter()
        .position(|frame| is_file(&frame.file, student))
    {
        Some(at) if (1..=lines).contains(&frames[at].line) => Attribution::Student {
            line: frames[at].line,
            through: frames[..at].to_vec(),
        },
        _ => Attribution::Own,
    }
}

/// Whether `path`, as [`file_path`] gives it, is the file NVRTC was given as
/// `name`: the same, or `name` after the folder NVRTC put before it.
pub fn is_file(path: &str, name: &str) -> bool {
    path == name
        || path
            .strip_suffix(name)
            .is_some_and(|folder| folder.ends_with('/') && !name.starts_with('/'))
}

/// The name of the function a relocation's symbol stands for: the symbol's
/// own name, or for a section symbol the function defined at the start of
/// that section.
fn function_named(file: &object::File<'_>, symbol: &object::Symbol<'_, '_>) -> Option<String> {
    if symbol.kind() == SymbolKind::Text {
        return symbol.name().ok().map(str::to_owned);
    }
    let section = symbol.section_index()?;
    file.symbols()
        .find(|s| {
            s.kind() == SymbolKind::Text
                && s.is_definition()
                && s.section_index() == Some(section)
                && s.address() == 0
        })
        .and_then(|s| s.name().ok().map(str::to_owned))
}

/// The path of file `index` of the header: its folder and its name. NVRTC
/// splits the name it was given into a folder and a last part when it is
/// absolute, and puts its working folder before a relative one.
fn file_path(
    header: &gimli::LineProgramHeader<EndianSlice<'_, LittleEndian>>,
    index: u64,
) -> String {
    let text = |value: gimli::AttributeValue<EndianSlice<'_, LittleEndian>>| match value {
        gimli::AttributeValue::String(s) => String::from_utf8_lossy(s.slice()).into_owned(),
        _ => String::new(),
    };
    let Some(entry) = header.file(index) else {
        return String::new();
    };
    let name = text(entry.path_name());
    match entry.directory(header).map(text) {
        Some(folder) if !folder.is_empty() && !name.starts_with('/') => {
            format!("{}/{name}", folder.trim_end_matches('/'))
        }
        _ => name,
    }
}

/// The NUL-terminated string at `offset` of `.debug_str`.
fn string_at(strings: &[u8], offset: u64) -> String {
    let start = (offset as usize).min(strings.len());
    let end = strings[start..]
        .iter()
        .position(|&b| b == 0)
        .map_or(strings.len(), |n| start + n);
    String::from_utf8_lossy(&strings[start..end]).into_owned()
}

trait ReadOperand {
    fn read_uleb128_u64(
        &mut self,
        unreadable: &dyn Fn(String) -> LineTableError,
    ) -> Result<u64, LineTableError>;
}

impl ReadOperand for EndianSlice<'_, LittleEndian> {
    fn read_uleb128_u64(
        &mut self,
        unreadable: &dyn Fn(String) -> LineTableError,
    ) -> Result<u64, LineTableError> {
        gimli::Reader::read_uleb128(self)
            .map_err(|e| unreadable(format!("an inlined-at record: {e}")))
    }
}
