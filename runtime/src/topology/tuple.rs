//! Tuples: the values that flow between components, their field names, and the anchors that tie
//! each tuple to the root messages whose trees it belongs to.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

/// One value in a tuple.
///
/// Strings are `Arc<str>` and byte strings are [`Bytes`], so copying a tuple to several tasks
/// (the `all` grouping) never copies the text or the payload.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// No value.
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Text.
    Str(Arc<str>),
    /// Bytes, e.g. a message payload.
    Bytes(Bytes),
    /// String headers, e.g. a message's headers.
    Map(Headers),
}

impl Value {
    /// The text, if this is a [`Value::Str`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The integer, if this is a [`Value::Int`].
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// The float, if this is a [`Value::Float`] (or an [`Value::Int`], widened).
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    /// The bytes, if this is a [`Value::Bytes`].
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
    /// The headers, if this is a [`Value::Map`].
    pub fn as_map(&self) -> Option<&Headers> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

// Hashing drives the `fields` grouping; floats hash by bit pattern.
impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Value::Null => state.write_u8(0),
            Value::Bool(b) => {
                state.write_u8(1);
                b.hash(state)
            }
            Value::Int(i) => {
                state.write_u8(2);
                i.hash(state)
            }
            Value::Float(f) => {
                state.write_u8(3);
                f.to_bits().hash(state)
            }
            Value::Str(s) => {
                state.write_u8(4);
                s.hash(state)
            }
            Value::Bytes(b) => {
                state.write_u8(5);
                b.hash(state)
            }
            Value::Map(m) => {
                state.write_u8(6);
                for (k, v) in m.iter() {
                    k.hash(state);
                    v.hash(state);
                }
            }
        }
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v.into())
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v.into())
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Int(v as i64)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.into())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v.into())
    }
}
impl From<Arc<str>> for Value {
    fn from(v: Arc<str>) -> Self {
        Value::Str(v)
    }
}
impl From<Bytes> for Value {
    fn from(v: Bytes) -> Self {
        Value::Bytes(v)
    }
}
impl From<Headers> for Value {
    fn from(v: Headers) -> Self {
        Value::Map(v)
    }
}

/// The values of one tuple, in the order of its [`Fields`].
///
/// Build them from a Rust tuple of things that convert into [`Value`]
/// (`Values::from(("word", 1))`), from a `Vec<Value>`, or by collecting; read them as a slice
/// (`values[0]`, `values.iter()`).
///
/// (Values live in one heap allocation. Storing a few inline was tried and measured slower:
/// a tuple is moved several times on its way and every move copied the inline values.)
#[derive(Clone, PartialEq, Default)]
pub struct Values(Vec<Value>);

impl Values {
    /// No values.
    pub fn new() -> Values {
        Values(Vec::new())
    }

    /// Appends a value.
    pub fn push(&mut self, value: Value) {
        self.0.push(value);
    }

    /// The values as a slice.
    pub fn as_slice(&self) -> &[Value] {
        &self.0
    }
}

impl std::ops::Deref for Values {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        self.as_slice()
    }
}

impl fmt::Debug for Values {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl FromIterator<Value> for Values {
    fn from_iter<T: IntoIterator<Item = Value>>(iter: T) -> Self {
        Values(iter.into_iter().collect())
    }
}

impl From<Vec<Value>> for Values {
    fn from(v: Vec<Value>) -> Self {
        Values(v)
    }
}

macro_rules! values_from_tuple {
    ($($name:ident),+) => {
        impl<$($name: Into<Value>),+> From<($($name,)+)> for Values {
            #[allow(non_snake_case)]
            fn from(($($name,)+): ($($name,)+)) -> Self {
                Values(vec![$($name.into()),+])
            }
        }
    };
}
values_from_tuple!(A);
values_from_tuple!(A, B);
values_from_tuple!(A, B, C);
values_from_tuple!(A, B, C, D);
values_from_tuple!(A, B, C, D, E);
values_from_tuple!(A, B, C, D, E, F);
values_from_tuple!(A, B, C, D, E, F, G);

/// Message or tuple headers: string keys to string values, cheap to clone (shared until
/// changed), and free when empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers(Option<Arc<BTreeMap<String, String>>>);

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Headers(None)
    }
    /// The value of header `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.as_ref()?.get(key).map(String::as_str)
    }
    /// Sets header `key` (copies the map first if it is shared).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        Arc::make_mut(self.0.get_or_insert_with(Default::default)).insert(key.into(), value.into());
    }
    /// All headers, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .flat_map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
    /// True when there are no headers.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|m| m.is_empty())
    }
    /// The headers as a map (`None` when there are none).
    pub fn as_map(&self) -> Option<&BTreeMap<String, String>> {
        self.0.as_deref().filter(|m| !m.is_empty())
    }

    /// The headers as the rule engine reads them (`FailureContext::headers`): borrowed, never
    /// copied; no headers lend a shared empty map.
    #[inline]
    pub fn view(&self) -> &rebound_engine::HeaderMap {
        static NONE: rebound_engine::HeaderMap = BTreeMap::new();
        self.0.as_deref().unwrap_or(&NONE)
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Headers {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        let map: BTreeMap<String, String> = iter
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        if map.is_empty() {
            Headers(None)
        } else {
            Headers(Some(Arc::new(map)))
        }
    }
}

/// The field names of a component's output, e.g. `["word", "count"]`.
///
/// Field lists are interned for the life of the process (there are only a handful per
/// topology), so a tuple refers to its names with one copied pointer and no reference count.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fields(&'static [&'static str]);

impl Fields {
    /// Interns a field list. Names must be distinct.
    pub fn new<I, S>(names: I) -> Fields
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names: Vec<&'static str> = names.into_iter().map(|s| intern(s.as_ref())).collect();
        static LISTS: OnceLock<Mutex<HashSet<&'static [&'static str]>>> = OnceLock::new();
        let mut lists = LISTS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(found) = lists.get(names.as_slice()) {
            return Fields(found);
        }
        let leaked: &'static [&'static str] = Box::leak(names.into_boxed_slice());
        lists.insert(leaked);
        Fields(leaked)
    }
    /// The position of field `name`.
    #[inline]
    pub fn index(&self, name: &str) -> Option<usize> {
        // Bolts look fields up by name for every tuple: compare the lengths and the first
        // and last bytes before the bytes themselves, which settles almost every mismatch
        // without a call to `memcmp`.
        let n = name.as_bytes();
        let (Some(&first), Some(&last)) = (n.first(), n.last()) else {
            return self.0.iter().position(|f| f.is_empty());
        };
        self.0.iter().position(|f| {
            let f = f.as_bytes();
            f.len() == n.len() && f[0] == first && f[f.len() - 1] == last && f == n
        })
    }
    /// The names, in order.
    pub fn names(&self) -> &'static [&'static str] {
        self.0
    }
    /// The number of fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when there are no fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0).finish()
    }
}

/// Interns a string for the life of the process (component and field names only).
pub(crate) fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(found) = names.get(s) {
        return found;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// Which tuple trees a tuple belongs to: for each root id, the XOR of this tuple's edge ids
/// in that tree. Almost every tuple has one root, so that case does not allocate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Anchors {
    One { root: u64, val: u64 },
    Many(Vec<(u64, u64)>),
}

impl Anchors {
    /// An empty anchor set, to be filled with [`Anchors::put_xor`].
    pub(crate) fn empty() -> Anchors {
        Anchors::Many(Vec::new())
    }

    /// XORs `val` into this tuple's entry for `root`, adding the root if it is new.
    pub(crate) fn put_xor(&mut self, root: u64, val: u64) {
        match self {
            Anchors::One { root: r, val: v } if *r == root => *v ^= val,
            Anchors::One { root: r, val: v } => {
                *self = Anchors::Many(vec![(*r, *v), (root, val)]);
            }
            Anchors::Many(list) if list.is_empty() => *self = Anchors::One { root, val },
            Anchors::Many(list) => match list.iter_mut().find(|(r, _)| *r == root) {
                Some((_, v)) => *v ^= val,
                None => list.push((root, val)),
            },
        }
    }

    /// Each (root, value) pair.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let (one, many) = match self {
            Anchors::One { root, val } => (Some((*root, *val)), &[][..]),
            Anchors::Many(list) => (None, list.as_slice()),
        };
        one.into_iter().chain(many.iter().copied())
    }

    /// The root ids.
    pub(crate) fn roots(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(r, _)| r)
    }
}

/// What every tuple a component emits shares: the component's name and its output fields.
/// Interned, like [`Fields`], so that a tuple carries one pointer for both.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Origin {
    source: &'static str,
    fields: Fields,
}

impl Origin {
    /// The interned origin of tuples from component `source` with output `fields`.
    pub(crate) fn new(source: &'static str, fields: Fields) -> &'static Origin {
        static ORIGINS: OnceLock<Mutex<HashSet<&'static Origin>>> = OnceLock::new();
        let mut origins = ORIGINS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let origin = Origin { source, fields };
        if let Some(found) = origins.get(&origin) {
            return found;
        }
        let leaked: &'static Origin = Box::leak(Box::new(origin));
        origins.insert(leaked);
        leaked
    }
}

/// A tuple: named values, anchored to the tuple trees it belongs to.
///
/// A bolt reads values by position ([`Tuple::get`]) or by field name ([`Tuple::field`],
/// [`Tuple::str`], …). The anchors are the runtime's business: they are never exposed, and every
/// tuple a bolt emits through the runtime is anchored to its input.
///
/// (Kept small — 56 bytes — because tuples are written into every batch: the source and field
/// names are one pointer to their interned `Origin`.)
#[derive(Clone)]
pub struct Tuple {
    pub(crate) values: Values,
    pub(crate) origin: &'static Origin,
    pub(crate) anchors: Anchors,
}

impl fmt::Debug for Tuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tuple")
            .field("values", &self.values)
            .field("fields", &self.origin.fields)
            .field("source", &self.origin.source)
            .field("anchors", &self.anchors)
            .finish()
    }
}

impl Tuple {
    /// All values, in field order.
    pub fn values(&self) -> &[Value] {
        self.values.as_slice()
    }
    /// The field names.
    pub fn fields(&self) -> Fields {
        self.origin.fields
    }
    /// The name of the component that emitted this tuple.
    pub fn source(&self) -> &'static str {
        self.origin.source
    }
    /// The value at position `i`.
    pub fn get(&self, i: usize) -> Option<&Value> {
        self.values.get(i)
    }
    /// The value of field `name`.
    #[inline]
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.origin
            .fields
            .index(name)
            .and_then(|i| self.values.get(i))
    }
    /// The text of field `name`, if it is a string.
    #[inline]
    pub fn str(&self, name: &str) -> Option<&str> {
        self.field(name).and_then(Value::as_str)
    }
    /// The integer of field `name`, if it is one.
    #[inline]
    pub fn int(&self, name: &str) -> Option<i64> {
        self.field(name).and_then(Value::as_int)
    }
    /// The bytes of field `name`, if they are bytes.
    #[inline]
    pub fn bytes(&self, name: &str) -> Option<&Bytes> {
        self.field(name).and_then(Value::as_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_interned_once() {
        let a = Fields::new(["x", "y"]);
        let b = Fields::new(vec!["x".to_string(), "y".to_string()]);
        assert!(std::ptr::eq(a.names(), b.names()));
        assert_eq!(a.index("y"), Some(1));
        assert_eq!(a.index("z"), None);
    }

    #[test]
    fn index_compares_whole_names() {
        let f = Fields::new(["abc", "axc", "", "abcd", "a"]);
        assert_eq!(f.index("axc"), Some(1));
        assert_eq!(f.index("abc"), Some(0));
        assert_eq!(f.index(""), Some(2));
        assert_eq!(f.index("abcd"), Some(3));
        assert_eq!(f.index("a"), Some(4));
        assert_eq!(f.index("ayc"), None);
        assert_eq!(f.index("ab"), None);
        assert_eq!(Fields::new(["x"]).index(""), None);
    }

    #[test]
    fn tuples_stay_small_and_origins_are_interned() {
        assert!(
            std::mem::size_of::<Tuple>() <= 56,
            "{}",
            std::mem::size_of::<Tuple>()
        );
        let a = Origin::new("split", Fields::new(["word"]));
        let b = Origin::new("split", Fields::new(["word"]));
        assert!(std::ptr::eq(a, b));
        assert!(!std::ptr::eq(
            a,
            Origin::new("count", Fields::new(["word"]))
        ));
    }

    #[test]
    fn put_xor_merges_roots() {
        let mut a = Anchors::empty();
        a.put_xor(1, 0b01);
        assert_eq!(a, Anchors::One { root: 1, val: 0b01 });
        a.put_xor(1, 0b10);
        assert_eq!(a, Anchors::One { root: 1, val: 0b11 });
        a.put_xor(2, 5);
        a.put_xor(1, 0b11);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![(1, 0), (2, 5)]);
    }

    #[test]
    fn values_build_and_read() {
        let mut v = Values::from((1, 2, 3, 4, 5));
        assert_eq!(v.len(), 5);
        v.push(Value::from("six"));
        assert_eq!(v.len(), 6);
        assert_eq!(v[5].as_str(), Some("six"));
        let long: Vec<Value> = (0..7).map(Value::from).collect();
        assert_eq!(Values::from(long.clone()).as_slice(), &long[..]);
        assert_eq!(Values::from(vec![Value::Int(1)]), Values::from((1,)));
        assert!(Values::default().is_empty());
    }

    #[test]
    fn headers_are_copy_on_write() {
        let mut h: Headers = [("a", "1")].into_iter().collect();
        let copy = h.clone();
        h.insert("b", "2");
        assert_eq!(copy.get("b"), None);
        assert_eq!(h.get("b"), Some("2"));
        assert!(Headers::new().is_empty());
        assert!(Headers::new().view().is_empty());
        let h: Headers = [("tenant", "vip")].into_iter().collect();
        assert_eq!(h.view().get("tenant").map(String::as_str), Some("vip"));
        assert!(
            std::ptr::eq(h.view(), h.as_map().unwrap()),
            "a view, not a copy"
        );
    }
}
