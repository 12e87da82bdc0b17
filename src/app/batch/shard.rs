//! Splitting one grading job over several machines (`--shard K/N`).
//!
//! The split depends only on the sorted ids, so every array task computes
//! the same partition on its own without talking to the others, and the
//! shards together cover every submission exactly once.

use std::fmt;
use std::str::FromStr;

use super::submissions::Submission;

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parsed = text
            .split_once('/')
            .and_then(|(k, n)| Some((k.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if (1..=count).contains(&index) => Ok(Self { index, count }),
            _ => Err(format!(
                "expected K/N with 1 <= K <= N (for example 2/8), found `{text}`"
            )),
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// This shard's share of submissions already sorted by id.
    pub fn select(self, sorted: Vec<Submission>) -> Vec<Submission> {
        sorted
            .into_iter()
            .enumerate()
            .filter(|(position, _)| position % self.count == self.index - 1)
            .map(|(_, submission)| submission)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_valid_shards() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        for bad in ["0/3", "4/3", "1/0", "1", "a/b", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shards_partition_the_submissions() {
        let all: Vec<Submission> = (0..10)
            .map(|i| {
                let name = format!("s{i:02}.cu");
                Submission::refused(name.clone(), name.into(), String::new())
            })
            .collect();
        let mut seen: Vec<String> = (1..=3)
            .flat_map(|k| Shard { index: k, count: 3 }.select(all.clone()))
            .map(|s| s.id)
            .collect();
        assert_eq!(
            Shard { index: 1, count: 3 }
                .select(all.clone())
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>(),
            ["s00.cu", "s03.cu", "s06.cu", "s09.cu"]
        );
        seen.sort();
        assert_eq!(seen, all.iter().map(|s| s.id.clone()).collect::<Vec<_>>());
    }
}
