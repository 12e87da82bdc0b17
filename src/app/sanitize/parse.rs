//! Reads compute-sanitizer's text log (`--log-file`) into findings.
//!
//! compute-sanitizer 2025.3 (CUDA 13.0) writes every line of its report with
//! a `=========` prefix. A report is a block: one line with a single space
//! after the prefix (`Error: Race reported between Write access at f+0x10 in
//! k.cu:35`, `Invalid __global__ read of size 4 bytes`, `Barrier error
//! detected. ...`), its details indented further (`and Read access at ... in
//! k.cu:48 [2048 hazards]`, `at f+0x1c0 in k.cu:12`, `by thread (0,0,0) in
//! block (0,0,0)`, host backtraces), and a line with nothing after the prefix
//! between blocks. The log ends with a summary (`ERROR SUMMARY: 0 errors`,
//! `RACECHECK SUMMARY: 4 hazards displayed (4 errors, 0 warnings)`).
//! Its `--xml` output needs `--save` and carries the same sites, so the text
//! is what flashprof reads; the fixtures under `tests/fixtures/sanitizer/`
//! are real logs captured on an H200.

use super::{Access, Finding, SanitizerTool, Site};

/// What one log said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedLog {
    /// Each distinct report, in the order first seen, with how often it came.
    pub findings: Vec<Finding>,
    /// The summary line, when the tool got as far as writing one.
    pub summary: Option<String>,
}

const PREFIX: &str = "=========";

/// Parses the text log of `tool`. Findings are not yet diagnosed.
pub fn parse_log(tool: SanitizerTool, text: &str) -> ParsedLog {
    let mut parsed = ParsedLog::default();
    let mut block: Vec<&str> = Vec::new();
    let flush = |block: &mut Vec<&str>, parsed: &mut ParsedLog| {
        if let Some(finding) = finding_of(tool, block) {
            match parsed
                .findings
                .iter_mut()
                .find(|f| f.headline == finding.headline && same_sites(f, &finding))
            {
                Some(seen) => {
                    seen.reported += 1;
                    for (a, b) in seen.accesses.iter_mut().zip(&finding.accesses) {
                        a.hazards = match (a.hazards, b.hazards) {
                            (Some(x), Some(y)) => Some(x.max(y)),
                            (x, y) => x.or(y),
                        };
                    }
                }
                None => parsed.findings.push(finding),
            }
        }
        block.clear();
    };
    for raw in text.lines() {
        let Some(rest) = raw.strip_prefix(PREFIX) else {
            continue; // the target's own output, should any reach the log
        };
        if rest.trim().is_empty() {
            flush(&mut block, &mut parsed);
            continue;
        }
        let top_level = rest.starts_with(' ') && !rest[1..].starts_with(' ');
        let line = rest.trim();
        if !top_level {
            if !block.is_empty() {
                block.push(line);
            }
            continue;
        }
        flush(&mut block, &mut parsed);
        if line == "COMPUTE-SANITIZER" || line == "Target application returned an error" {
            continue;
        }
        if line.contains("SUMMARY:") {
            // The first says how many; a second one says how many went unprinted.
            parsed.summary.get_or_insert_with(|| line.to_owned());
            continue;
        }
        block.push(line);
    }
    flush(&mut block, &mut parsed);
    parsed
}

fn same_sites(a: &Finding, b: &Finding) -> bool {
    a.accesses.len() == b.accesses.len()
        && a.accesses.iter().zip(&b.accesses).all(|(x, y)| {
            x.kind == y.kind && x.site.file == y.site.file && x.site.line == y.site.line
        })
}

/// One block of the log as a finding; `None` for an empty block.
fn finding_of(tool: SanitizerTool, block: &[&str]) -> Option<Finding> {
    let (first, details) = block.split_first()?;
    let headline = first
        .strip_prefix("Error: ")
        .or_else(|| first.strip_prefix("Warning: "))
        .unwrap_or(first);
    let mut accesses = Vec::new();
    let mut in_host_backtrace = false;
    for line in std::iter::once(&headline).chain(details.iter()) {
        if line.starts_with("Saved host backtrace") {
            in_host_backtrace = true;
            continue;
        }
        if in_host_backtrace || line.starts_with("Host Frame") {
            continue;
        }
        if let Some(access) = access_of(line) {
            accesses.push(access);
        }
    }
    // A race's headline names its first site; other reports name what
    // happened and give the site on an `at` line.
    let headline = match headline.split_once(" access at ") {
        Some(_) if headline.starts_with("Race reported between") => "Race reported".to_owned(),
        _ => headline.to_owned(),
    };
    let details = details
        .iter()
        .filter(|l| !l.starts_with("and ") && !l.starts_with("at ") && !l.contains("Host Frame"))
        .take_while(|l| !l.starts_with("Saved host backtrace"))
        .map(|l| l.to_string())
        .collect();
    Some(Finding {
        tool,
        headline,
        details,
        accesses,
        reported: 1,
        diagnosis: String::new(),
    })
}

/// A site on a line: `[and ]{Read|Write} access at FUNC+0xOFF in FILE:LINE [N hazards]`,
/// `at FUNC+0xOFF in FILE:LINE`, or `Device Frame: FUNC+0xOFF in FILE:LINE`.
fn access_of(line: &str) -> Option<Access> {
    let line = line.strip_prefix("and ").unwrap_or(line);
    let (kind, rest) = if let Some((before, after)) = line.split_once(" access at ") {
        let kind = before
            .rsplit(' ')
            .next()
            .unwrap_or(before)
            .to_ascii_lowercase();
        (kind, after)
    } else if let Some(after) = line.strip_prefix("at ") {
        (String::new(), after)
    } else if let Some(after) = line.strip_prefix("Device Frame:") {
        (String::new(), after.trim_start())
    } else {
        return None;
    };
    let (rest, hazards) = match rest.rsplit_once(" [") {
        Some((site, tail)) if tail.ends_with(" hazards]") || tail.ends_with(" hazard]") => (
            site,
            tail.split(' ').next().and_then(|n| n.parse::<u64>().ok()),
        ),
        _ => (rest, None),
    };
    let (function, place) = rest.rsplit_once(" in ")?;
    let (file, line_no) = place.trim().rsplit_once(':')?;
    let line_no: u32 = line_no.parse().ok()?;
    let function = function
        .rsplit_once("+0x")
        .map(|(f, _)| f)
        .unwrap_or(function)
        .trim();
    Some(Access {
        kind,
        site: Site {
            function: function.to_owned(),
            file: file.to_owned(),
            line: line_no,
            code: None,
        },
        hazards,
    })
}

/// The short name of a function as compute-sanitizer prints it:
/// `<unnamed>::loadShared4(const float *)` is `loadShared4`.
pub fn short_function(function: &str) -> &str {
    let name = function.split('(').next().unwrap_or(function);
    name.rsplit("::").next().unwrap_or(name).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_race_block_gives_its_write_and_each_read_with_hazard_counts() {
        let log = "========= COMPUTE-SANITIZER\n\
========= Error: Race reported between Write access at attention_prefill+0xb60 in race.cu:35\n\
=========     and Read access at attention_prefill+0x27c0 in race.cu:48 [2048 hazards]\n\
=========     and Read access at <unnamed>::f(const float *)+0x27f0 in race.cu:49 [1 hazard]\n\
========= \n\
========= RACECHECK SUMMARY: 1 hazards displayed (1 errors, 0 warnings)\n";
        let parsed = parse_log(SanitizerTool::Racecheck, log);
        assert_eq!(
            parsed.summary.as_deref(),
            Some("RACECHECK SUMMARY: 1 hazards displayed (1 errors, 0 warnings)")
        );
        assert_eq!(parsed.findings.len(), 1);
        let f = &parsed.findings[0];
        assert_eq!(f.headline, "Race reported");
        let sites: Vec<(&str, &str, u32, Option<u64>)> = f
            .accesses
            .iter()
            .map(|a| {
                (
                    a.kind.as_str(),
                    a.site.function.as_str(),
                    a.site.line,
                    a.hazards,
                )
            })
            .collect();
        assert_eq!(
            sites,
            vec![
                ("write", "attention_prefill", 35, None),
                ("read", "attention_prefill", 48, Some(2048)),
                ("read", "<unnamed>::f(const float *)", 49, Some(1)),
            ]
        );
        assert_eq!(short_function(&f.accesses[2].site.function), "f");
    }

    #[test]
    fn a_memcheck_block_takes_its_site_from_the_at_line_and_skips_host_frames() {
        let log = "========= COMPUTE-SANITIZER\n\
========= Invalid __global__ write of size 4 bytes\n\
=========     at attention_prefill+0x1c0 in k.cu:12\n\
=========     by thread (0,0,0) in block (3,0,0)\n\
=========     Address 0x7f00 is out of bounds\n\
=========     Saved host backtrace up to driver entry point at kernel launch time\n\
=========         Host Frame: cuLaunchKernel in libcuda.so.1:7\n\
========= \n\
========= ERROR SUMMARY: 1 error\n";
        let parsed = parse_log(SanitizerTool::Memcheck, log);
        let f = &parsed.findings[0];
        assert_eq!(f.headline, "Invalid __global__ write of size 4 bytes");
        assert_eq!(f.accesses.len(), 1);
        assert_eq!(
            (f.accesses[0].site.file.as_str(), f.accesses[0].site.line),
            ("k.cu", 12)
        );
        assert_eq!(
            f.details,
            vec![
                "by thread (0,0,0) in block (3,0,0)",
                "Address 0x7f00 is out of bounds"
            ]
        );
        assert_eq!(parsed.summary.as_deref(), Some("ERROR SUMMARY: 1 error"));
    }

    #[test]
    fn repeated_blocks_are_one_finding_counted() {
        let block = "========= Barrier error detected. Divergent thread(s) in block\n\
=========     at attention_prefill+0x90 in k.cu:7\n\
========= \n";
        let log = format!("{block}{block}========= ERROR SUMMARY: 2 errors\n");
        let parsed = parse_log(SanitizerTool::Synccheck, &log);
        assert_eq!(parsed.findings.len(), 1);
        assert_eq!(parsed.findings[0].reported, 2);
    }

    #[test]
    fn a_log_cut_short_has_no_summary() {
        let parsed = parse_log(SanitizerTool::Initcheck, "========= COMPUTE-SANITIZER\n");
        assert!(parsed.findings.is_empty());
        assert!(parsed.summary.is_none());
    }
}
