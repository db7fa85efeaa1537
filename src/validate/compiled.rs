//! A compiled schema as the check and its reports read it.

use jsonschema::Validator;
use serde_json::Value;

/// A schema as the check reads it: its text (for reports), its validator, and how many
/// `anyOf` and `oneOf` branches it has (counted once per schema: they bound what a report
/// may copy, `report::explainable`).
#[derive(Clone, Copy)]
pub struct Compiled<'a> {
    pub value: &'a Value,
    pub validator: &'a Validator,
    pub alternatives: usize,
}
