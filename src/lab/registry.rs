//! The labs this build of flashprof hosts, found by name. The list itself
//! is the `labs!` line of `lab/mod.rs`, which also declares each lab's folder.

use super::definition::Lab;
use super::LABS;

/// Every lab, the default first.
pub fn labs() -> Vec<&'static dyn Lab> {
    LABS.iter().map(|lab| lab.0).collect()
}

/// The lab used when none is named: the course's first.
pub fn default_lab() -> &'static dyn Lab {
    LABS[0].0
}

/// The lab called `name`.
pub fn find(name: &str) -> Option<&'static dyn Lab> {
    labs().into_iter().find(|lab| lab.name() == name)
}

/// Why `name` is not a lab, listing the labs there are.
pub fn unknown(name: &str) -> String {
    let names: Vec<&str> = labs().iter().map(|lab| lab.name()).collect();
    format!(
        "no lab named `{}` (labs: {})",
        crate::display::quoted_short(name, 64),
        names.join(", ")
    )
}
