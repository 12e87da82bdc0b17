//! The `flashprof check` command that reruns a check on the same inputs:
//! what `check` prints as "reproduce with" and what the TUI copies (`y`).
//!
//! The command is built once per session from the options that changed
//! the run, and the seed is added per check, because the TUI's checks
//! each draw from a seed of their own.

/// Every word of the command but the seed, each already quoted for a
/// POSIX shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReproduceCommand {
    words: Vec<String>,
}

impl ReproduceCommand {
    /// `flashprof check FILE --lab LAB`, the least a rerun needs.
    pub fn new(file: &str, lab: &str) -> Self {
        let mut command = Self { words: Vec::new() };
        for word in ["flashprof", "check", file, "--lab", lab] {
            command.words.push(shell_quoted(word));
        }
        command
    }

    /// The command with `flag` (and its value, when it takes one) added.
    pub fn with(mut self, flag: &str, value: Option<&str>) -> Self {
        self.words.push(shell_quoted(flag));
        self.words.extend(value.map(shell_quoted));
        self
    }

    /// The whole command for a check that drew its inputs from `seed`.
    pub fn for_seed(&self, seed: u64) -> String {
        format!("{} --seed {seed}", self.words.join(" "))
    }

    /// The whole command for a check that drew no inputs (its file did not
    /// compile): a seed would claim inputs that mattered.
    pub fn without_seed(&self) -> String {
        self.words.join(" ")
    }
}

/// `word` as one POSIX shell word: bare when it holds only characters no
/// shell treats specially, else in single quotes (a `'` inside as `'\''`).
fn shell_quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=,:@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_a_shell_would_split_or_expand_is_quoted() {
        assert_eq!(shell_quoted("k.cu"), "k.cu");
        assert_eq!(
            shell_quoted("chunk=1024,prefix=512"),
            "chunk=1024,prefix=512"
        );
        assert_eq!(shell_quoted("my kernel.cu"), "'my kernel.cu'");
        assert_eq!(shell_quoted("it's$HOME.cu"), "'it'\\''s$HOME.cu'");
        assert_eq!(shell_quoted(""), "''");
    }

    #[test]
    fn the_seed_comes_last_and_every_word_is_quoted() {
        let command = ReproduceCommand::new("my kernel.cu", "flash-prefill")
            .with("--case", Some("chunk-of-1"))
            .with("--no-timing", None);
        assert_eq!(
            command.for_seed(7),
            "flashprof check 'my kernel.cu' --lab flash-prefill --case chunk-of-1 --no-timing --seed 7"
        );
    }
}
