//! A compiled schema as the check and its reports read it.

use super::Doubling;
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
    pub doubling: Option<Doubling>,
    /// A `$ref` in it leads back to a schema it is within (`Unfolded::recursive`).
    pub recursive: bool,
}

impl Compiled<'_> {
    /// The branches `value`'s errors may copy: for a schema whose checks multiply with each
    /// level of a value, counted once per way to each.
    pub fn alternatives_for(&self, value: &Value) -> usize {
        match self.doubling {
            Some(d) => d.alternatives(self.alternatives, value),
            None => self.alternatives,
        }
    }
}
