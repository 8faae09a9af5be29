//! What a decoded object weighs in memory: an estimate of the heap bytes a `serde_json::Value`
//! holds, from serde_json's own layout.
//!
//! A JSON object's bytes say little about its memory once parsed. A map with one entry takes a
//! whole B-tree leaf (eleven key and eleven value slots, about 630 bytes), so `{"a":1}`, 7 bytes
//! of JSON, holds about 650 bytes parsed: 90 times its text. Nesting such maps gives the worst
//! ratio, about 130 (`{"":{"":{...}}}`, 5 bytes a level). Real objects hold 11 to 16 times their
//! JSON (a Pod: many small maps and short strings; `tests/weight.rs`). Bounds on cached
//! memory therefore count this weight, not the JSON size: the history's byte bound
//! ([`crate::history`]) and the server's bound on the caches' live objects.
//!
//! ## What is counted
//! Each allocation is counted as the bytes requested plus [`ALLOCATION_OVERHEAD`] (malloc's
//! header and rounding, on average):
//! - a string's bytes (serde_json allocates them exactly);
//! - an array's `Vec<Value>` of 32-byte slots as a parse grows it, pushing items one by one:
//!   four, then doubling (a value built in code may hold fewer, so this errs high);
//! - a map's B-tree nodes as serde_json's parser builds them, inserting the keys in order:
//!   one leaf up to [`LEAF_KEYS`] entries, then a leaf per [`SPLIT_KEYS`] entries (a full leaf
//!   split on an append keeps six keys and moves one up), and an internal node per that many
//!   children; each key's string.
//!
//! It is an estimate, tested against a counting allocator over parsed bodies of every shape
//! (`tests/weight.rs`: within 0.9x to 1.1x of what the parse allocated; exact for all but
//! wide maps, which are within 1 %). It walks the value
//! once without allocating.

use serde_json::Value;

/// The bytes counted per allocation beyond those requested: glibc's 8-byte chunk header and
/// the rounding to 16 bytes, on average.
pub const ALLOCATION_OVERHEAD: usize = 16;

/// Keys in a B-tree leaf of the standard library's `BTreeMap` (`2 * B - 1`, `B = 6`).
pub const LEAF_KEYS: usize = 11;

/// Keys per node when a map is built by appending keys in order: a full node split on an
/// append keeps six keys on its left, moves one up to its parent and starts the right with
/// the rest, so each node left behind stands for seven keys (and an internal node for seven
/// children).
pub const SPLIT_KEYS: usize = 7;

/// Bytes of one `serde_json::Value` slot (in a `Vec` or a map node).
const VALUE_SLOT: usize = std::mem::size_of::<Value>();

/// Bytes of one `String` slot (a map node's key).
const KEY_SLOT: usize = std::mem::size_of::<String>();

/// Bytes of a `BTreeMap<String, Value>` leaf node: its key and value slots, the parent link,
/// its index in the parent and its length.
const LEAF_NODE: usize = LEAF_KEYS * (KEY_SLOT + VALUE_SLOT) + 8 + 2 + 2 + 4;

/// Bytes of an internal node: a leaf and its twelve child links.
const INTERNAL_NODE: usize = LEAF_NODE + (LEAF_KEYS + 1) * 8;

/// The bytes one allocation of `requested` bytes takes (none for zero: nothing is allocated).
#[must_use]
pub const fn allocation(requested: usize) -> usize {
    if requested == 0 {
        0
    } else {
        requested + ALLOCATION_OVERHEAD
    }
}

/// The heap bytes `value` holds beyond its own 32-byte slot (see the module docs).
#[must_use]
pub fn heap_bytes(value: &Value) -> usize {
    measure(value).heap
}

/// What one walk of a value finds: its heap bytes ([`heap_bytes`]) and about how long its
/// JSON encoding is (strings and keys by length with their quotes, punctuation counted,
/// numbers as 8 bytes: an estimate for values that were not decoded from a known text).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measure {
    /// Heap bytes beyond the value's own slot.
    pub heap: usize,
    /// About how long its JSON encoding is.
    pub json: usize,
    /// Its levels of maps and arrays: 0 for a scalar, 1 for a map or array of scalars.
    pub depth: usize,
}

/// Both measures of `value` in one walk, without allocating.
#[must_use]
pub fn measure(value: &Value) -> Measure {
    measure_at(value, 0)
}

/// [`measure`] of a value `depth` levels below the first one measured, each level on a stack
/// with room for it ([`crate::stack::deep`]: an object may nest 10,000 levels).
fn measure_at(value: &Value, depth: usize) -> Measure {
    let below = depth + 1;
    match value {
        Value::Null | Value::Bool(true) => Measure {
            heap: 0,
            json: 4,
            depth: 0,
        },
        Value::Bool(false) => Measure {
            heap: 0,
            json: 5,
            depth: 0,
        },
        Value::Number(_) => Measure {
            heap: 0,
            json: 8,
            depth: 0,
        },
        Value::String(text) => Measure {
            heap: allocation(text.len()),
            json: text.len() + 2,
            depth: 0,
        },
        Value::Array(items) => items.iter().fold(
            Measure {
                heap: allocation(array_slots(items.len()) * VALUE_SLOT),
                json: 2,
                depth: 1,
            },
            |total, item| {
                let item = crate::stack::deep(below, || measure_at(item, below));
                Measure {
                    heap: total.heap + item.heap,
                    json: total.json + item.json + 1,
                    depth: total.depth.max(item.depth + 1),
                }
            },
        ),
        Value::Object(map) => map.iter().fold(
            Measure {
                heap: map_nodes(map.len()),
                json: 2,
                depth: 1,
            },
            |total, (key, item)| {
                let item = crate::stack::deep(below, || measure_at(item, below));
                Measure {
                    heap: total.heap + allocation(key.len()) + item.heap,
                    json: total.json + key.len() + 4 + item.json,
                    depth: total.depth.max(item.depth + 1),
                }
            },
        ),
    }
}

/// The slots of an array of `len` items as a parse grows it: pushed one by one, so from four
/// slots doubling.
fn array_slots(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.next_power_of_two().max(4)
    }
}

/// The bytes of the B-tree nodes of a map of `entries` built by in-order inserts.
fn map_nodes(entries: usize) -> usize {
    if entries == 0 {
        return 0;
    }
    let leaves = if entries <= LEAF_KEYS {
        1
    } else {
        entries.div_ceil(SPLIT_KEYS)
    };
    let mut internal = 0;
    let mut level = leaves;
    while level > 1 {
        level = level.div_ceil(SPLIT_KEYS);
        internal += level;
    }
    leaves * allocation(LEAF_NODE) + internal * allocation(INTERNAL_NODE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_hold_nothing_and_strings_their_bytes() {
        assert_eq!(heap_bytes(&json!(null)), 0);
        assert_eq!(heap_bytes(&json!(12.5)), 0);
        assert_eq!(heap_bytes(&json!("")), 0);
        assert_eq!(heap_bytes(&json!("abc")), 3 + ALLOCATION_OVERHEAD);
        assert_eq!(heap_bytes(&json!({})), 0);
        assert_eq!(heap_bytes(&json!([])), 0);
    }

    #[test]
    fn a_one_entry_map_takes_a_whole_leaf() {
        let one = heap_bytes(&json!({"a": 1}));
        assert_eq!(one, allocation(LEAF_NODE) + allocation(1));
        assert!(one > 600, "{one}");
        // Eleven entries share the leaf; a twelfth splits it.
        let eleven: serde_json::Map<String, Value> =
            (0..11).map(|i| (format!("k{i:02}"), json!(1))).collect();
        let twelve: serde_json::Map<String, Value> =
            (0..12).map(|i| (format!("k{i:02}"), json!(1))).collect();
        let keys = |n: usize| n * allocation(3);
        assert_eq!(
            heap_bytes(&Value::Object(eleven)),
            allocation(LEAF_NODE) + keys(11)
        );
        assert_eq!(
            heap_bytes(&Value::Object(twelve)),
            2 * allocation(LEAF_NODE) + allocation(INTERNAL_NODE) + keys(12)
        );
    }

    #[test]
    fn the_node_layout_matches_the_standard_library() {
        // The leaf's slots: what `size_of` says of the parts (the node type is private).
        assert_eq!(KEY_SLOT, 24);
        assert_eq!(VALUE_SLOT, 32);
        assert_eq!(LEAF_NODE, 632);
    }
}
