//! The speed gate: does a kernel's speedup over the starter clear the bar
//! set for the GPU model it ran on?
//!
//! Speedups differ by GPU model, so one number cannot serve every course.
//! Thresholds live in a small TOML table keyed by the device name the driver
//! reports; flashprof ships the H200's and the H100's, each with its
//! version, and `flashprof calibrate` writes a user table for any other
//! model. The engine never sees the gate: commands
//! compute it from a finished [`CheckReport`], which keeps grading and
//! policy apart.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::outcome::CheckReport;

/// The gates flashprof ships (the H200's and the H100's), overridden by a user table.
pub const SHIPPED_GATES: &str = include_str!("../../assets/gates.toml");

/// Share of the reference kernel's speedup a student must reach.
pub const REFERENCE_SHARE: f64 = 0.5;
/// Thresholds are rounded down to a multiple of this.
pub const THRESHOLD_STEP: f64 = 0.5;

/// The threshold the calibration rule gives for a measured reference speedup:
/// half of it, rounded down to a multiple of 0.5, and never below 1x (a
/// kernel slower than the starter passes no speed gate).
pub fn threshold_from_reference(reference_speedup: f64) -> f64 {
    let half = reference_speedup * REFERENCE_SHARE;
    ((half / THRESHOLD_STEP).floor() * THRESHOLD_STEP).max(1.0)
}

/// One GPU model's gate for one lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuGate {
    /// The lab whose reference set the gate (absent: the first lab, as in
    /// gate files written before labs were named).
    #[serde(default = "first_lab")]
    pub lab: String,
    /// The device name as the driver reports it, e.g. `NVIDIA H200`.
    pub name: String,
    pub threshold: f64,
    /// The reference kernel's speedup the threshold was derived from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_speedup: Option<f64>,
    /// When the calibration ran (a date, as text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_on: Option<String>,
    /// The timing rules the calibration ran under
    /// ([`crate::protocol::TIMING_RULES`]); absent in gates written before
    /// gates had a version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_rules: Option<u32>,
    /// From fewer than [`LASTING_RUNS`] calibration runs (one run's speedup
    /// moves with clocks and neighbours): a gate to work with on a GPU
    /// nothing was shipped for, said wherever it judges.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provisional: bool,
}

/// Calibration runs a gate needs not to be provisional.
pub const LASTING_RUNS: u32 = 3;

fn first_lab() -> String {
    "flash-prefill".into()
}

/// Gates for every known GPU model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GateTable {
    #[serde(default, rename = "gpu")]
    pub gpus: Vec<GpuGate>,
}

/// A gates file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GateTableError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl GpuGate {
    /// What a verdict records of the gate that judged it: threshold, timing
    /// rules and calibration date, so a gradebook row says which gate it
    /// was judged by after the table has moved on.
    pub fn version(&self) -> String {
        let rules = self
            .timing_rules
            .map_or("rules unrecorded".to_owned(), |r| {
                format!("timing rules {r}")
            });
        let date = self.measured_on.as_deref().unwrap_or("date unrecorded");
        let provisional = if self.provisional {
            ", provisional"
        } else {
            ""
        };
        format!(
            "{:.1}x, {rules}, calibrated {date}{provisional}",
            self.threshold
        )
    }

    fn serves(&self, lab: &str, device_name: &str) -> bool {
        self.lab == lab && self.name.trim().eq_ignore_ascii_case(device_name.trim())
    }
}

impl GateTable {
    /// Parses a gates table; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, GateTableError> {
        let table: Self = toml::from_str(text).map_err(|e| GateTableError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        if let Some(bad) = table
            .gpus
            .iter()
            .find(|g| !(g.threshold.is_finite() && g.threshold > 0.0))
        {
            return Err(GateTableError::Parse {
                path: origin.to_string(),
                message: format!("`{}` needs a positive threshold", bad.name),
            });
        }
        Ok(table)
    }

    /// Reads a gates file; a missing file is an empty table.
    pub fn load(path: &Path) -> Result<Self, GateTableError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(GateTableError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// The shipped table with the user's file (when there is one) on top.
    pub fn effective() -> Result<Self, GateTableError> {
        let mut table = Self::parse(SHIPPED_GATES, "assets/gates.toml")?;
        if let Some(path) = user_gates_path() {
            for gate in Self::load(&path)?.gpus {
                table.upsert(gate);
            }
        }
        Ok(table)
    }

    /// The gate of `lab` for a device name; names compare without regard to
    /// case or outer spaces.
    pub fn lookup(&self, lab: &str, device_name: &str) -> Option<&GpuGate> {
        self.gpus.iter().find(|g| g.serves(lab, device_name))
    }

    /// Adds a gate, replacing one for the same lab and device.
    pub fn upsert(&mut self, gate: GpuGate) {
        match self
            .gpus
            .iter_mut()
            .find(|g| g.serves(&gate.lab, &gate.name))
        {
            Some(existing) => *existing = gate,
            None => self.gpus.push(gate),
        }
    }

    /// Writes the table as TOML, creating the parent folder.
    pub fn save(&self, path: &Path) -> Result<(), GateTableError> {
        let write_error = |source| GateTableError::Write {
            path: path.display().to_string(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(write_error)?;
        }
        let body = toml::to_string_pretty(self).map_err(|e| GateTableError::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let text =
            format!("# Speed gates written by `flashprof calibrate` (rule: docs/TA.md).\n\n{body}");
        std::fs::write(path, text).map_err(write_error)
    }
}

/// `$XDG_CONFIG_HOME/flashprof/gates.toml`, else `~/.config/flashprof/gates.toml`.
pub fn user_gates_path() -> Option<PathBuf> {
    let non_empty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let config = non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("flashprof").join("gates.toml"))
}

/// The gate's verdict on one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum SpeedGate {
    Pass {
        speedup: f64,
        threshold: f64,
        gpu: String,
        /// The judging gate's [`GpuGate::version`] (empty in rows judged
        /// before gates had one).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        gate: String,
    },
    Fail {
        speedup: f64,
        threshold: f64,
        gpu: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        gate: String,
    },
    /// There is no speedup to judge: not timed, no GPU, or the timed output was wrong.
    NoSpeedup { reason: String },
    /// No gate is known for this GPU model: `flashprof calibrate` makes one
    /// (provisional from fewer than [`LASTING_RUNS`] runs).
    Uncalibrated {
        gpu: String,
        speedup: f64,
        /// The lab a gate is missing for (empty in rows judged before it
        /// was recorded).
        #[serde(default)]
        lab: String,
    },
}

impl SpeedGate {
    /// Judges a finished check against the table.
    pub fn evaluate(report: &CheckReport, table: &GateTable) -> Self {
        let gpu = match &report.gpu {
            Ok(info) => info.name.clone(),
            Err(_) => {
                return Self::NoSpeedup {
                    reason: "no GPU".into(),
                }
            }
        };
        let speedup = match (&report.timing, &report.timing_error) {
            (Some(t), _) => match (&t.speedup, t.withheld()) {
                (Some(s), _) => s.point,
                (None, reason) => {
                    return Self::NoSpeedup {
                        reason: reason.unwrap_or_else(|| "no speedup".into()),
                    }
                }
            },
            (None, Some(error)) => {
                return Self::NoSpeedup {
                    reason: error.clone(),
                }
            }
            (None, None) => {
                return Self::NoSpeedup {
                    reason: "not timed".into(),
                }
            }
        };
        match table.lookup(&report.lab, &gpu) {
            None => Self::Uncalibrated {
                gpu,
                speedup,
                lab: report.lab.clone(),
            },
            Some(gate) if speedup >= gate.threshold => Self::Pass {
                speedup,
                threshold: gate.threshold,
                gpu,
                gate: gate.version(),
            },
            Some(gate) => Self::Fail {
                speedup,
                threshold: gate.threshold,
                gpu,
                gate: gate.version(),
            },
        }
    }

    /// The version of the gate that judged this verdict, when one did.
    pub fn gate_version(&self) -> Option<&str> {
        match self {
            Self::Pass { gate, .. } | Self::Fail { gate, .. } => Some(gate),
            Self::NoSpeedup { .. } | Self::Uncalibrated { .. } => None,
        }
    }

    /// One word for a spreadsheet column.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Pass { .. } => "pass",
            Self::Fail { .. } => "fail",
            Self::NoSpeedup { .. } => "no_speedup",
            Self::Uncalibrated { .. } => "uncalibrated",
        }
    }
}

impl fmt::Display for SpeedGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pass {
                speedup,
                threshold,
                gpu,
                gate,
            } => write!(
                f,
                "speed gate: pass, {speedup:.1}x >= {threshold:.1}x on {gpu}{}",
                provisional_note(gate)
            ),
            Self::Fail {
                speedup,
                threshold,
                gpu,
                gate,
            } => write!(
                f,
                "speed gate: FAIL, {speedup:.1}x < {threshold:.1}x on {gpu}{}",
                provisional_note(gate)
            ),
            Self::NoSpeedup { reason } => write!(f, "speed gate: not judged ({reason})"),
            Self::Uncalibrated { gpu, speedup, lab } => {
                let lab = match lab.as_str() {
                    "" => String::new(),
                    lab => format!(" --lab {lab}"),
                };
                write!(
                    f,
                    "speed gate: none shipped for {gpu} ({speedup:.1}x measured); \
                     `flashprof calibrate{lab} --runs 1` makes a provisional gate on this GPU, \
                     `--runs {LASTING_RUNS}` or more a lasting one"
                )
            }
        }
    }
}

/// What a verdict adds when a provisional gate judged it (3 is [`LASTING_RUNS`]).
const PROVISIONAL_NOTE: &str = " (a provisional gate: calibrated on this GPU in fewer than 3 runs)";

/// What a verdict adds when a provisional gate judged it.
fn provisional_note(gate_version: &str) -> &'static str {
    match gate_version.ends_with(", provisional") {
        true => PROVISIONAL_NOTE,
        false => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_half_the_reference_rounded_down_to_a_half() {
        assert_eq!(threshold_from_reference(18.3), 9.0);
        assert_eq!(threshold_from_reference(19.0), 9.5);
        assert_eq!(threshold_from_reference(18.99), 9.0);
        assert_eq!(threshold_from_reference(7.2), 3.5);
        // A slow reference never makes a slower-than-starter kernel pass.
        assert_eq!(threshold_from_reference(1.4), 1.0);
    }

    #[test]
    fn shipped_table_holds_the_h200_and_the_h100_for_each_lab_with_their_versions() {
        let table = GateTable::parse(SHIPPED_GATES, "shipped").unwrap();
        for (gpu, rules, gates) in [
            (
                " nvidia h200",
                2,
                [
                    ("flash-prefill", 9.0),
                    ("paged-prefill", 12.0),
                    ("paged-decode", 6.0),
                    ("paged-prefill-fp8", 49.5),
                ],
            ),
            (
                "NVIDIA H100 80GB HBM3",
                3,
                [
                    ("flash-prefill", 9.0),
                    ("paged-prefill", 12.5),
                    ("paged-decode", 4.5),
                    ("paged-prefill-fp8", 47.5),
                ],
            ),
        ] {
            for (lab, threshold) in gates {
                let gate = table.lookup(lab, gpu).expect("a shipped gate");
                assert_eq!(gate.threshold, threshold, "{lab} on {gpu}");
                assert_eq!(
                    gate.reference_speedup.map(threshold_from_reference),
                    Some(threshold),
                    "{lab} on {gpu}"
                );
                assert_eq!(gate.timing_rules, Some(rules), "{lab} on {gpu}");
                assert!(gate.measured_on.is_some(), "{lab} on {gpu}");
            }
        }
        assert!(table.lookup("flash-prefill", "NVIDIA L4").is_none());
        assert!(table.lookup("decode-v2", "NVIDIA H200").is_none());
    }

    #[test]
    fn upsert_replaces_by_name_and_save_round_trips() {
        let mut table = GateTable::parse(SHIPPED_GATES, "shipped").unwrap();
        let shipped = table.gpus.len();
        let faster = GpuGate {
            lab: "flash-prefill".into(),
            name: "NVIDIA H200".into(),
            threshold: 10.0,
            reference_speedup: Some(20.4),
            measured_on: None,
            timing_rules: Some(3),
            provisional: false,
        };
        table.upsert(faster.clone());
        table.upsert(GpuGate {
            name: "NVIDIA L4".into(),
            ..faster
        });
        // The H200's flash-prefill entry replaced, the L4 added.
        assert_eq!(table.gpus.len(), shipped + 1);
        assert_eq!(
            table
                .lookup("flash-prefill", "NVIDIA H200")
                .map(|g| g.threshold),
            Some(10.0)
        );
        assert_eq!(
            table
                .lookup("paged-prefill", "NVIDIA H200")
                .map(|g| g.threshold),
            Some(12.0),
            "another lab's gate on the same GPU is left alone"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("gates.toml");
        table.save(&path).unwrap();
        assert_eq!(GateTable::load(&path).unwrap(), table);
        assert_eq!(
            GateTable::load(&dir.path().join("absent.toml")).unwrap(),
            GateTable::default()
        );
    }

    #[test]
    fn a_non_positive_threshold_is_refused() {
        let err = GateTable::parse("[[gpu]]\nname = \"X\"\nthreshold = 0.0\n", "t").unwrap_err();
        assert!(err.to_string().contains("positive threshold"));
    }

    #[test]
    fn a_verdict_records_the_gate_that_judged_it_and_an_older_row_still_reads() {
        let gate = GpuGate {
            lab: "flash-prefill".into(),
            name: "NVIDIA H100 80GB HBM3".into(),
            threshold: 9.0,
            reference_speedup: Some(18.4),
            measured_on: Some("2026-12-06".into()),
            timing_rules: Some(3),
            provisional: false,
        };
        assert_eq!(
            gate.version(),
            "9.0x, timing rules 3, calibrated 2026-12-06"
        );
        let unversioned = GpuGate {
            measured_on: None,
            timing_rules: None,
            ..gate.clone()
        };
        assert_eq!(
            unversioned.version(),
            "9.0x, rules unrecorded, calibrated date unrecorded"
        );
        // A gradebook row judged before gates had a version reads, with none.
        let old: SpeedGate = serde_json::from_str(
            r#"{"verdict":"pass","speedup":18.2,"threshold":9.0,"gpu":"NVIDIA H200"}"#,
        )
        .unwrap();
        assert_eq!(old.gate_version(), Some(""));
        let judged = SpeedGate::Fail {
            speedup: 3.0,
            threshold: 9.0,
            gpu: gate.name.clone(),
            gate: gate.version(),
        };
        let json = serde_json::to_string(&judged).unwrap();
        assert_eq!(serde_json::from_str::<SpeedGate>(&json).unwrap(), judged);
        assert!(json.contains("timing rules 3"), "{json}");
    }

    /// A gate from one calibration run judges, and says it is provisional
    /// in its version (a gradebook's column) and in its verdict's line; a
    /// GPU with no gate is offered one.
    #[test]
    fn a_provisional_gate_says_so_wherever_it_judges() {
        let table = GateTable::parse(
            "[[gpu]]\nlab = \"paged-decode\"\nname = \"NVIDIA L40S\"\nthreshold = 3.5\n\
             measured_on = \"2026-12-06\"\ntiming_rules = 3\nprovisional = true\n",
            "t",
        )
        .unwrap();
        let gate = table.lookup("paged-decode", "NVIDIA L40S").unwrap();
        assert!(gate.provisional);
        assert_eq!(
            gate.version(),
            "3.5x, timing rules 3, calibrated 2026-12-06, provisional"
        );
        let judged = SpeedGate::Pass {
            speedup: 4.0,
            threshold: 3.5,
            gpu: gate.name.clone(),
            gate: gate.version(),
        };
        assert!(judged.to_string().contains("provisional gate"), "{judged}");
        // Written back, it stays provisional; a lasting gate writes no key.
        let text = toml::to_string(&table).unwrap();
        assert!(text.contains("provisional = true"), "{text}");
        let lasting = GpuGate {
            provisional: false,
            ..gate.clone()
        };
        assert!(!toml::to_string(&lasting).unwrap().contains("provisional"));
        assert!(PROVISIONAL_NOTE.contains(&format!("fewer than {LASTING_RUNS} runs")));
        let none = SpeedGate::Uncalibrated {
            gpu: "NVIDIA L40S".into(),
            speedup: 7.1,
            lab: "paged-decode".into(),
        };
        assert!(
            none.to_string().contains(
                "`flashprof calibrate --lab paged-decode --runs 1` makes a provisional gate"
            ),
            "{none}"
        );
        // A row judged before the lab was recorded still reads.
        let old: SpeedGate =
            serde_json::from_str(r#"{"verdict":"uncalibrated","gpu":"NVIDIA L40S","speedup":7.1}"#)
                .unwrap();
        assert!(
            old.to_string().contains("`flashprof calibrate --runs 1`"),
            "{old}"
        );
    }
}
