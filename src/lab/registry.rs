//! The labs this build of flashprof hosts, found by name.

use super::definition::Lab;
use super::flash_prefill::FlashPrefill;
use super::paged::PagedPrefill;

/// Every lab, the default first.
pub fn labs() -> [&'static dyn Lab; 2] {
    [&FlashPrefill, &PagedPrefill]
}

/// The lab used when none is named: the course's first.
pub fn default_lab() -> &'static dyn Lab {
    labs()[0]
}

/// The lab called `name`.
pub fn find(name: &str) -> Option<&'static dyn Lab> {
    labs().into_iter().find(|lab| lab.name() == name)
}

/// Why `name` is not a lab, listing the labs there are.
pub fn unknown(name: &str) -> String {
    let names: Vec<&str> = labs().iter().map(|lab| lab.name()).collect();
    format!("no lab named `{name}` (labs: {})", names.join(", "))
}
