//! A plain line diff, enough to show what changed between two saves.
//!
//! Student files are a few hundred lines, so the textbook longest common
//! subsequence table is small and gives the minimal diff; past a size limit
//! the diff degrades to "everything removed, everything added" instead of
//! spending seconds on a table nobody will read.

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffLine {
    Same(String),
    Removed(String),
    Added(String),
}

/// Files longer than this are not diffed line by line.
const MAX_LINES: usize = 4000;

/// The lines of `old` and `new`, in order, each marked kept, removed or added.
pub fn line_diff(old: &str, new: &str) -> Vec<DiffLine> {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    if old.len() > MAX_LINES || new.len() > MAX_LINES {
        let removed = old.iter().map(|l| DiffLine::Removed((*l).to_owned()));
        let added = new.iter().map(|l| DiffLine::Added((*l).to_owned()));
        return removed.chain(added).collect();
    }
    // common[i][j]: length of the longest common subsequence of old[i..] and new[j..].
    let width = new.len() + 1;
    let mut common = vec![0u32; (old.len() + 1) * width];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i * width + j] = if old[i] == new[j] {
                common[(i + 1) * width + j + 1] + 1
            } else {
                common[(i + 1) * width + j].max(common[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(old.len().max(new.len()));
    while i < old.len() && j < new.len() {
        if old[i] == new[j] {
            out.push(DiffLine::Same(old[i].to_owned()));
            i += 1;
            j += 1;
        } else if common[(i + 1) * width + j] >= common[i * width + j + 1] {
            out.push(DiffLine::Removed(old[i].to_owned()));
            i += 1;
        } else {
            out.push(DiffLine::Added(new[j].to_owned()));
            j += 1;
        }
    }
    out.extend(old[i..].iter().map(|l| DiffLine::Removed((*l).to_owned())));
    out.extend(new[j..].iter().map(|l| DiffLine::Added((*l).to_owned())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(diff: &[DiffLine]) -> String {
        diff.iter()
            .map(|l| match l {
                DiffLine::Same(t) => format!(" {t}"),
                DiffLine::Removed(t) => format!("-{t}"),
                DiffLine::Added(t) => format!("+{t}"),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_changed_line_shows_as_removed_then_added() {
        let diff = line_diff("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(render(&diff), " a\n-b\n+B\n c");
    }

    #[test]
    fn insertions_and_deletions_keep_the_common_lines() {
        let diff = line_diff("a\nb\nc\nd", "x\na\nc\nd\ny");
        assert_eq!(render(&diff), "+x\n a\n-b\n c\n d\n+y");
    }

    #[test]
    fn identical_texts_have_no_changes() {
        let diff = line_diff("a\nb", "a\nb");
        assert!(diff.iter().all(|l| matches!(l, DiffLine::Same(_))));
        assert_eq!(diff.len(), 2);
    }
}
