//! What every lab's cases file shares: `[[case]]` tables with a well-formed,
//! unique name each, and perhaps a folder of the case's own tensors,
//! relative to the file. Each lab then checks its own keys.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::definition::CaseError;

/// One `[[case]]` table of a lab's cases file.
pub trait CaseTable: DeserializeOwned {
    fn name(&self) -> &str;
    /// The case's own tensor folder, as written.
    fn tensors_mut(&mut self) -> &mut Option<PathBuf>;
}

/// Makes a lab's case struct, with `name`, `summary` and `tensors:
/// Option<PathBuf>` fields, a `[[case]]` table ([`CaseTable`]) and a recipe
/// the engine carries ([`crate::lab::typed::Recipe`]).
macro_rules! case_table {
    ($case:ty) => {
        impl $crate::lab::case_file::CaseTable for $case {
            fn name(&self) -> &str {
                &self.name
            }
            fn tensors_mut(&mut self) -> &mut Option<std::path::PathBuf> {
                &mut self.tensors
            }
        }

        impl $crate::lab::typed::Recipe for $case {
            fn name(&self) -> &str {
                &self.name
            }
            fn summary(&self) -> &str {
                &self.summary
            }
            fn own_tensors(&self) -> Option<&std::path::Path> {
                self.tensors.as_deref()
            }
        }
    };
}
pub(crate) use case_table;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile<T> {
    case: Vec<T>,
}

/// The case named `name` among `cases`, for a lab's tests.
#[cfg(test)]
pub fn named<T: CaseTable>(cases: Vec<T>, name: &str) -> T {
    cases
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

/// The random stream of the case (or timing shape) `name` under a run's
/// `seed`: the same on every machine, so a printed seed reproduces a run,
/// and a stream of its own, so adding a case changes no other.
pub fn case_rng(seed: u64, name: &str) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ stable_hash(name))
}

/// FNV-1a: stable across Rust versions and platforms, unlike `DefaultHasher`.
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The bytes of `name` in a case's tensor folder, or `None` when the file
/// is not there (the lab decides whether it was required); read as outside
/// input ([`super::npy::read_file`]: a regular file, no link, bounded).
pub fn read_tensor_file(dir: &Path, name: &str) -> std::io::Result<Option<Vec<u8>>> {
    super::npy::read_file(&dir.join(name)).map_err(|error| match error {
        super::npy::NpyError::Io { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    })
}

/// The `[[case]]` tables of `text` (shown as `file`): every name letters,
/// digits, `-` and `_`, no name twice, at least one case, tensor folders
/// resolved against `base`.
pub fn read_case_tables<T: CaseTable>(
    text: &str,
    file: &str,
    base: &Path,
) -> Result<Vec<T>, CaseError> {
    let parse = |message: String| CaseError::Parse {
        file: file.to_owned(),
        message,
    };
    let parsed: CasesFile<T> = toml::from_str(text).map_err(|e| parse(e.to_string()))?;
    let mut seen = HashSet::new();
    let mut cases = Vec::with_capacity(parsed.case.len());
    for mut case in parsed.case {
        let name = case.name().to_owned();
        let well_formed = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !well_formed {
            return Err(CaseError::Invalid {
                case: name,
                message: "names use letters, digits, '-' and '_' only".into(),
            });
        }
        if !seen.insert(name.clone()) {
            return Err(parse(format!("two cases are named `{name}`")));
        }
        if let Some(dir) = case.tensors_mut() {
            *dir = base.join(&*dir);
        }
        cases.push(case);
    }
    if cases.is_empty() {
        return Err(parse("no [[case]] entries".into()));
    }
    Ok(cases)
}
