//! Cases files of every registered lab, through `Lab::parse_cases` and the
//! registry (`registry::find` on the name the input picks).
//!
//! The first byte picks the lab; the rest is the TOML text. Properties: no
//! panic; parsing is deterministic; at least one case, names unique; and a
//! small accepted case (every number in its recipe at most 128, no tensors
//! of its own) builds its problem and inputs (`Lab::problem`, `Lab::generate`) without a
//! panic: what the parser lets through must not blow up later.
#![no_main]

use std::path::Path;

use flashprof::lab::registry;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn small(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64().is_some_and(|x| x.abs() <= 128.0),
        Value::Array(items) => items.len() <= 64 && items.iter().all(small),
        Value::Object(map) => map.values().all(small),
        _ => true,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let labs = registry::labs();
    let name = labs[usize::from(pick) % labs.len()].name();
    let lab = registry::find(name).expect("a registered lab is found by its name");
    let base = Path::new("/nonexistent/flashprof-fuzz");
    let first = lab.parse_cases(text, "cases.toml", base);
    let second = lab.parse_cases(text, "cases.toml", base);
    match (&first, &second) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("parse_cases is not deterministic"),
    }
    let Ok(cases) = first else {
        return;
    };
    assert!(!cases.is_empty());
    let names: std::collections::HashSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "two accepted cases share a name");
    for case in &cases {
        let recipe: Value = serde_json::from_str(&case.recipe.to_json()).expect("a recipe is JSON");
        if lab.own_tensors(case).is_none() && small(&recipe) {
            let _ = lab.problem(case);
            let _ = lab.generate(case, 1);
        }
    }
});
