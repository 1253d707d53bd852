//! Typed reads of checked values: one accessor per value type ([`number`], [`word`] …),
//! and [`Reader`], which applies them to a definition's merged fields by the schema's
//! field names.
//!
//! The values were type-checked against the schema before they get here, so an absent
//! field or one of another type reads as "not set".

use crate::program::{DefId, FieldValue, Value};
use std::collections::BTreeMap;

/// A number (an integer reads as one).
pub(super) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Int(i) => Some(*i as f64),
        _ => None,
    }
}

pub(super) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// A whole number, negatives read as 0.
pub(super) fn uint(v: &Value) -> Option<u64> {
    int(v).map(|v| v.max(0) as u64)
}

pub(super) fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

/// One of an enum's bare words.
pub(super) fn word(v: &Value) -> Option<String> {
    match v {
        Value::Enum(s) => Some(s.clone()),
        _ => None,
    }
}

pub(super) fn string(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.clone()),
        _ => None,
    }
}

pub(super) fn reference(v: &Value) -> Option<DefId> {
    match v {
        Value::Ref(id) => Some(*id),
        _ => None,
    }
}

/// A nested block's fields.
pub(super) fn block(v: &Value) -> Option<&BTreeMap<String, FieldValue>> {
    match v {
        Value::Block(b) => Some(b),
        _ => None,
    }
}

/// The items of a list that `item` reads (others are skipped).
fn list<T>(v: Option<&Value>, item: impl Fn(&Value) -> Option<T>) -> Vec<T> {
    match v {
        Some(Value::List(items)) => items.iter().filter_map(item).collect(),
        _ => Vec::new(),
    }
}

/// A list of strings.
pub(super) fn strings(v: &Value) -> Vec<String> {
    list(Some(v), string)
}

/// `"NAME=value"` strings as pairs, in order (an item without `=` is skipped).
pub(super) fn pairs(v: &Value) -> Vec<(String, String)> {
    strings(v)
        .iter()
        .filter_map(|s| s.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Typed access to merged fields by the schema's field names.
pub(super) struct Reader<'a>(pub(super) &'a BTreeMap<String, FieldValue>);

impl Reader<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.0.get(k).map(|v| &v.value)
    }
    pub(super) fn num(&self, k: &str) -> Option<f64> {
        self.get(k).and_then(number)
    }
    pub(super) fn int(&self, k: &str) -> Option<i64> {
        self.get(k).and_then(int)
    }
    pub(super) fn uint(&self, k: &str) -> Option<u64> {
        self.get(k).and_then(uint)
    }
    pub(super) fn boolean(&self, k: &str) -> Option<bool> {
        self.get(k).and_then(boolean)
    }
    pub(super) fn word(&self, k: &str) -> Option<String> {
        self.get(k).and_then(word)
    }
    /// One of an enum's bare words as the Rust enum `parse` maps it to (`LinkType::parse`).
    pub(super) fn keyword<T>(&self, k: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
        self.word(k).and_then(|w| parse(&w))
    }
    pub(super) fn string(&self, k: &str) -> Option<String> {
        self.get(k).and_then(string)
    }
    pub(super) fn reference(&self, k: &str) -> Option<DefId> {
        self.get(k).and_then(reference)
    }
    pub(super) fn block(&self, k: &str) -> Option<&BTreeMap<String, FieldValue>> {
        self.get(k).and_then(block)
    }
    pub(super) fn strings(&self, k: &str) -> Vec<String> {
        list(self.get(k), string)
    }
    /// `"key=value"` strings as pairs ([`pairs`]).
    pub(super) fn pairs(&self, k: &str) -> Vec<(String, String)> {
        self.get(k).map(pairs).unwrap_or_default()
    }
    pub(super) fn words(&self, k: &str) -> Vec<String> {
        list(self.get(k), word)
    }
    pub(super) fn uints(&self, k: &str) -> Vec<u64> {
        list(self.get(k), |v| int(v).and_then(|i| u64::try_from(i).ok()))
    }
    pub(super) fn count_of(&self, k: &str) -> Option<(u64, DefId)> {
        match self.get(k)? {
            Value::CountOf(n, id) => Some((*n, *id)),
            _ => None,
        }
    }
}
