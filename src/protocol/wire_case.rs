//! How a lab's case crosses the worker pipe: the lab's name and its
//! recipe's JSON. This is the one place a recipe is JSON; on either side it
//! is the lab's own typed case ([`LabCase`]): the caller's from its cases
//! file, the worker's decoded once by the lab it loaded.

use serde::{Deserialize, Serialize};

use crate::lab::definition::{CaseError, Lab, LabCase};

/// A case on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireCase {
    /// The lab whose recipe this is.
    pub lab: String,
    pub recipe: serde_json::Value,
}

impl From<&LabCase> for WireCase {
    fn from(case: &LabCase) -> Self {
        WireCase {
            lab: case.lab.to_owned(),
            recipe: serde_json::from_str(&case.recipe.to_json()).expect("a recipe's JSON is JSON"),
        }
    }
}

impl WireCase {
    /// The case, decoded by `lab`, which must be the lab that sent it.
    pub fn decode(&self, lab: &dyn Lab) -> Result<LabCase, CaseError> {
        if self.lab != lab.name() {
            return Err(CaseError::Invalid {
                case: "(from the worker pipe)".into(),
                message: format!(
                    "a case of lab `{}` sent to a worker of lab `{}`",
                    self.lab,
                    lab.name()
                ),
            });
        }
        lab.decode_case(&self.recipe.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged::testing::embedded;
    use crate::lab::paged_prefill::PAGED_PREFILL;
    use crate::lab::paged_prefill_fp8::PAGED_PREFILL_FP8;

    /// What crosses the pipe is checked as a cases file would be: a case of
    /// another lab, or a recipe its lab could not have parsed, is refused
    /// with a reason, never run (nor a worker lost to it).
    #[test]
    fn a_case_the_worker_s_lab_could_not_have_made_is_refused() {
        let fp32 = WireCase::from(&embedded(PAGED_PREFILL)[0]);
        let err = fp32.decode(&*PAGED_PREFILL_FP8).unwrap_err().to_string();
        assert!(err.contains("a case of lab `paged-prefill`"), "{err}");
        let mut no_format = WireCase::from(&embedded(PAGED_PREFILL_FP8)[0]);
        no_format.recipe.as_object_mut().unwrap().remove("format");
        let err = no_format
            .decode(&*PAGED_PREFILL_FP8)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`format` is missing"), "{err}");
        let mut fp8_key = fp32.clone();
        fp8_key.recipe["format"] = serde_json::json!("e4m3");
        let err = fp8_key.decode(&*PAGED_PREFILL).unwrap_err().to_string();
        assert!(err.contains("`format` is a key of FP8 caches"), "{err}");
        let other = &embedded(PAGED_PREFILL)[0];
        let err = PAGED_PREFILL_FP8
            .generate(other, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not of `paged-prefill-fp8`"), "{err}");
    }
}
