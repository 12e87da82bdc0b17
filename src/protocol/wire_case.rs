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
