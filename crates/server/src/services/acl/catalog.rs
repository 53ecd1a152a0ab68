//! The commands as ACL rules name them: every command and subcommand by id (its index in the
//! command table), with its categories. The command table builds it, since this layer sees no
//! commands.

use std::collections::HashMap;

/// A set of ACL categories (`@read`, `@string`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Categories(u32);

/// Redis's categories, in Redis's order (`ACLCommandCategories`), which ACL CAT lists and
/// rule descriptions try.
pub const CATEGORY_NAMES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

impl Categories {
    pub const NONE: Categories = Categories(0);

    /// The category `name` names (any case).
    pub fn named(name: &[u8]) -> Option<Categories> {
        CATEGORY_NAMES
            .iter()
            .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
            .map(|i| Categories(1 << i))
    }

    /// The category `name` names, which must be one of [`CATEGORY_NAMES`].
    pub const fn of(name: &str) -> Categories {
        let mut i = 0;
        while i < CATEGORY_NAMES.len() {
            if const_eq(CATEGORY_NAMES[i], name) {
                return Categories(1 << i);
            }
            i += 1;
        }
        panic!("not an ACL category");
    }

    pub const fn with(self, other: Categories) -> Categories {
        Categories(self.0 | other.0)
    }

    pub const fn without(self, other: Categories) -> Categories {
        Categories(self.0 & !other.0)
    }

    pub fn intersects(self, other: Categories) -> bool {
        self.0 & other.0 != 0
    }

    /// Names in Redis's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        CATEGORY_NAMES
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// One command or subcommand.
pub struct CatalogEntry {
    /// As Redis names it: `get`, `config|get`.
    pub name: &'static str,
    pub parent: Option<usize>,
    pub subcommands: Vec<usize>,
    pub categories: Categories,
}

pub struct Catalog {
    entries: Vec<CatalogEntry>,
    by_name: HashMap<&'static str, usize>,
    /// Every id, each command followed by its subcommands: the order rules are described in.
    order: Vec<usize>,
}

impl Catalog {
    pub fn new(entries: Vec<CatalogEntry>) -> Catalog {
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(id, e)| (e.name, id))
            .collect();
        let mut order = Vec::with_capacity(entries.len());
        for (id, entry) in entries.iter().enumerate() {
            if entry.parent.is_none() {
                order.push(id);
                order.extend(&entry.subcommands);
            }
        }
        Catalog {
            entries,
            by_name,
            order,
        }
    }

    /// The id of `name` (`get`, `CONFIG|GET`), in any case.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.by_name.get(lower.as_str()).copied()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entry(&self, id: usize) -> &CatalogEntry {
        &self.entries[id]
    }

    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The ids of the commands and subcommands in `category`, in [`Catalog::order`].
    pub fn in_category(&self, category: Categories) -> impl Iterator<Item = usize> + '_ {
        self.order
            .iter()
            .copied()
            .filter(move |&id| self.entries[id].categories.intersects(category))
    }
}
