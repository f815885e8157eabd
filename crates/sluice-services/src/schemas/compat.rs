//! Whether one JSON Schema accepts every instance another accepts: the question behind every
//! compatibility mode. `backward` asks it with the earlier version as the writer and the new one
//! as the reader (a consumer on the new schema reads old messages); `forward` the other way
//! round; `full` both.
//!
//! No maintained crate answers it for JSON Schema, so it is answered here, conservatively: a
//! pair passes only when every keyword of the reader is shown to hold for everything the writer
//! accepts. What cannot be shown (a changed `pattern`, a new `not`) is reported, never assumed.
//! The rules follow the schema registries' JSON Schema rules (Confluent, Apicurio): in an open
//! content model (`additionalProperties` absent or `true`) a property the writer did not declare
//! may hold anything, so giving it a schema in the reader narrows what is accepted.
//!
//! Local `$ref`s (`#/$defs/...`) are followed within each document; a pair met again while
//! following recursive references counts as compatible (it is being shown already).

use std::collections::{BTreeSet, HashSet};
use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::validate;

/// One way in which the writer accepts something the reader refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    /// A stable name for the kind of change (`type_narrowed`, `required_added`, ...).
    pub kind: &'static str,
    /// Where in the schemas, as a JSON pointer into the reader (`/properties/total`).
    pub path: String,
    pub message: String,
}

/// Keywords that do not change what a schema accepts.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$comment",
    "$defs",
    "definitions",
    "$vocabulary",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// Keywords this checker reasons about; any other keyword in the reader must be unchanged.
const UNDERSTOOD: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
];

const TYPES: &[&str] = &["null", "boolean", "object", "array", "number", "string", "integer"];

/// Every way in which `writer` accepts an instance `reader` refuses; empty when none is found.
/// Both are whole schema documents (their `$ref`s resolve within themselves).
pub fn accepts_all(writer: &Value, reader: &Value) -> Vec<Incompatibility> {
    let mut checker = Checker { writer_root: writer, reader_root: reader, seen: HashSet::new(), found: Vec::new() };
    checker.check(writer, reader, "");
    checker.found
}

struct Checker<'a> {
    writer_root: &'a Value,
    reader_root: &'a Value,
    /// Pairs (by address) being shown now, further up, so that recursive schemas end.
    seen: HashSet<(usize, usize)>,
    found: Vec<Incompatibility>,
}

impl<'a> Checker<'a> {
    fn report(&mut self, kind: &'static str, path: &str, message: String) {
        let path = if path.is_empty() { "/".to_owned() } else { path.to_owned() };
        self.found.push(Incompatibility { kind, path, message });
    }

    /// Whether `writer ⊆ reader` holds, without reporting (to try alternatives).
    fn holds(&mut self, writer: &'a Value, reader: &'a Value, path: &str) -> bool {
        let before = self.found.len();
        self.check(writer, reader, path);
        let holds = self.found.len() == before;
        self.found.truncate(before);
        holds
    }

    fn check(&mut self, writer: &'a Value, reader: &'a Value, path: &str) {
        if is_true(reader) || writer == &Value::Bool(false) {
            return;
        }
        if writer == reader && !contains_ref(writer) {
            return;
        }
        let pair = (writer as *const Value as usize, reader as *const Value as usize);
        if !self.seen.insert(pair) {
            return;
        }
        self.check_pair(writer, reader, path);
        self.seen.remove(&pair);
    }

    fn check_pair(&mut self, writer: &'a Value, reader: &'a Value, path: &str) {
        let Some(r) = reader.as_object() else {
            // `false`: nothing is accepted any more.
            self.report("everything_refused", path, "refuses every value, where values were accepted".into());
            return;
        };
        // `true` accepts anything: as a writer it is the empty schema.
        let w = writer.as_object().unwrap_or(&EMPTY);
        if self.writer_alternatives(w, reader, path) {
            return;
        }
        self.reader_conjuncts(w, writer, r, path);
        if let Some(values) = finite_values(w) {
            self.values(values, reader, r, path);
            return;
        }
        let types = self.types(w, r, path);
        let may = |t: &str| types.as_ref().is_none_or(|set| set.contains(t));
        if r.contains_key("enum") || r.contains_key("const") {
            self.report("values_restricted", path, "accepts only listed values, where any value was accepted".into());
        }
        if may("number") || may("integer") {
            self.numbers(w, r, path);
        }
        if may("string") {
            self.strings(w, r, path);
        }
        if may("array") {
            self.arrays(w, r, path);
        }
        if may("object") {
            self.objects(w, r, path);
        }
        self.unchanged_keywords(w, r, path);
    }

    /// A writer made of alternatives or conjuncts: shown when every alternative (or one
    /// conjunct) is accepted. Returns whether that settled the pair.
    fn writer_alternatives(&mut self, w: &'a Map<String, Value>, reader: &'a Value, path: &str) -> bool {
        let only = |keyword: &str| w.keys().all(|k| k == keyword || ANNOTATIONS.contains(&k.as_str()));
        for keyword in ["anyOf", "oneOf"] {
            if let Some(branches) = w.get(keyword).and_then(Value::as_array) {
                let failing: Vec<&'a Value> = branches.iter().filter(|b| !self.holds(b, reader, path)).collect();
                if failing.is_empty() {
                    return true;
                }
                // Nothing but the alternatives: say why each failing one falls short.
                if only(keyword) {
                    for branch in failing {
                        self.check(branch, reader, path);
                    }
                    return true;
                }
            }
        }
        let mut conjuncts: Vec<&'a Value> = Vec::new();
        if let Some(target) = w.get("$ref").and_then(Value::as_str) {
            match resolve(self.writer_root, target) {
                Some(t) => conjuncts.push(t),
                None => {
                    self.report("unresolved_ref", path, format!("the $ref {target:?} cannot be followed"));
                    return true;
                }
            }
        }
        if let Some(all) = w.get("allOf").and_then(Value::as_array) {
            conjuncts.extend(all.iter());
        }
        if conjuncts.is_empty() {
            return false;
        }
        if conjuncts.iter().any(|c| self.holds(c, reader, path)) {
            return true;
        }
        // A `$ref` standing alone is its target: say why that target falls short.
        if w.keys().all(|k| k == "$ref" || ANNOTATIONS.contains(&k.as_str())) {
            self.check(conjuncts[0], reader, path);
            return true;
        }
        false
    }

    /// The reader's `$ref`, `allOf`, `anyOf`, `oneOf`, `not` and conditionals.
    fn reader_conjuncts(
        &mut self,
        w: &'a Map<String, Value>,
        writer: &'a Value,
        r: &'a Map<String, Value>,
        path: &str,
    ) {
        if let Some(target) = r.get("$ref").and_then(Value::as_str) {
            match resolve(self.reader_root, target) {
                Some(t) => self.check(writer, t, path),
                None => self.report("unresolved_ref", path, format!("the $ref {target:?} cannot be followed")),
            }
        }
        if let Some(all) = r.get("allOf").and_then(Value::as_array) {
            for (i, part) in all.iter().enumerate() {
                self.check(writer, part, &format!("{path}/allOf/{i}"));
            }
        }
        if let Some(any) = r.get("anyOf").and_then(Value::as_array)
            && w.get("anyOf") != Some(&Value::Array(any.clone()))
            && !any.iter().any(|b| self.holds(writer, b, path))
        {
            self.report(
                "any_of_narrowed",
                &format!("{path}/anyOf"),
                "no alternative of anyOf accepts everything that was accepted".into(),
            );
        }
        if let Some(one) = r.get("oneOf").and_then(Value::as_array) {
            let same = w.get("oneOf") == Some(&Value::Array(one.clone())) && !contains_ref(&r["oneOf"]);
            if !same && !self.one_of(writer, one, path) {
                self.report(
                    "one_of_changed",
                    &format!("{path}/oneOf"),
                    "cannot show that exactly one alternative of oneOf accepts each value that was accepted".into(),
                );
            }
        }
        for keyword in ["not", "if", "then", "else"] {
            if let Some(value) = r.get(keyword)
                && w.get(keyword) != Some(value)
            {
                self.report(
                    "keyword_changed",
                    &format!("{path}/{keyword}"),
                    format!("{keyword} was added or changed, and its effect cannot be compared"),
                );
            }
        }
    }

    /// Whether the writer fits one alternative and is disjoint from all the others.
    fn one_of(&mut self, writer: &'a Value, branches: &'a [Value], path: &str) -> bool {
        let Some(fit) = branches.iter().position(|b| self.holds(writer, b, path)) else { return false };
        branches.iter().enumerate().all(|(i, other)| i == fit || disjoint(writer, other))
    }

    /// A writer with a finite set of values (`enum`, `const`): each is tried on the reader.
    fn values(&mut self, values: Vec<&Value>, reader: &Value, r: &Map<String, Value>, path: &str) {
        let compiled = if contains_ref(reader) { None } else { validate::compile(reader).ok() };
        for value in values {
            let accepted = match &compiled {
                Some(v) => v.is_valid(value),
                None => shallow_accepts(r, value),
            };
            if !accepted {
                self.report("value_refused", path, format!("the value {value} is no longer accepted"));
            }
        }
    }

    /// `type`: the writer's types must all be the reader's. Answers the writer's types (`None`:
    /// any type).
    fn types(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str) -> Option<BTreeSet<&'static str>> {
        let writer = type_set(w.get("type"));
        let Some(reader) = type_set(r.get("type")) else { return writer };
        let accepted = |t: &str| reader.contains(t) || (t == "integer" && reader.contains("number"));
        match &writer {
            None => self.report(
                "type_narrowed",
                &format!("{path}/type"),
                format!("accepts only {}, where any type was accepted", list(&reader)),
            ),
            Some(set) => {
                let lost: BTreeSet<&str> = set.iter().copied().filter(|t| !accepted(t)).collect();
                if !lost.is_empty() {
                    self.report(
                        "type_narrowed",
                        &format!("{path}/type"),
                        format!("no longer accepts {} (accepts {})", list(&lost), list(&reader)),
                    );
                }
            }
        }
        writer
    }

    fn numbers(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str) {
        let (w_min, w_min_ex) = (number(w, "minimum"), number(w, "exclusiveMinimum"));
        if let Some(m) = number(r, "minimum")
            && !(w_min.is_some_and(|x| x >= m) || w_min_ex.is_some_and(|x| x >= m))
        {
            self.bound(path, "minimum", "a lower minimum");
        }
        if let Some(m) = number(r, "exclusiveMinimum")
            && !(w_min.is_some_and(|x| x > m) || w_min_ex.is_some_and(|x| x >= m))
        {
            self.bound(path, "exclusiveMinimum", "a lower bound");
        }
        let (w_max, w_max_ex) = (number(w, "maximum"), number(w, "exclusiveMaximum"));
        if let Some(m) = number(r, "maximum")
            && !(w_max.is_some_and(|x| x <= m) || w_max_ex.is_some_and(|x| x <= m))
        {
            self.bound(path, "maximum", "a higher maximum");
        }
        if let Some(m) = number(r, "exclusiveMaximum")
            && !(w_max.is_some_and(|x| x < m) || w_max_ex.is_some_and(|x| x <= m))
        {
            self.bound(path, "exclusiveMaximum", "a higher bound");
        }
        if let Some(k) = number(r, "multipleOf") {
            let divides = number(w, "multipleOf").is_some_and(|kw| (kw / k).fract() == 0.0);
            if !divides {
                self.bound(path, "multipleOf", "other multiples");
            }
        }
    }

    fn strings(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str) {
        self.lower(w, r, path, "minLength");
        self.upper(w, r, path, "maxLength");
        if let Some(pattern) = r.get("pattern")
            && w.get("pattern") != Some(pattern)
        {
            self.report(
                "pattern_changed",
                &format!("{path}/pattern"),
                "the pattern was added or changed; strings that matched before may not match".into(),
            );
        }
    }

    fn arrays(&mut self, w: &'a Map<String, Value>, r: &'a Map<String, Value>, path: &str) {
        self.lower(w, r, path, "minItems");
        self.upper(w, r, path, "maxItems");
        if r.get("uniqueItems") == Some(&Value::Bool(true)) && w.get("uniqueItems") != Some(&Value::Bool(true)) {
            self.report("unique_items_added", &format!("{path}/uniqueItems"), "repeated items are refused now".into());
        }
        let w_prefix = w.get("prefixItems").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let r_prefix = r.get("prefixItems").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let w_items = w.get("items").unwrap_or(&TRUE);
        let r_items = r.get("items").unwrap_or(&TRUE);
        for i in 0..w_prefix.len().max(r_prefix.len()) {
            let (wi, ri) = (w_prefix.get(i).unwrap_or(w_items), r_prefix.get(i).unwrap_or(r_items));
            let at = if i < r_prefix.len() { format!("{path}/prefixItems/{i}") } else { format!("{path}/items") };
            self.check(wi, ri, &at);
        }
        self.check(w_items, r_items, &format!("{path}/items"));
    }

    fn objects(&mut self, w: &'a Map<String, Value>, r: &'a Map<String, Value>, path: &str) {
        self.lower(w, r, path, "minProperties");
        self.upper(w, r, path, "maxProperties");
        let w_required = strings(w.get("required"));
        for name in strings(r.get("required")) {
            if !w_required.contains(name) {
                self.report(
                    "required_added",
                    &format!("{path}/required"),
                    format!("{name:?} is required now, and values without it were accepted"),
                );
            }
        }
        let w_props = w.get("properties").and_then(Value::as_object).unwrap_or(&*EMPTY);
        let r_props = r.get("properties").and_then(Value::as_object).unwrap_or(&*EMPTY);
        let w_extra = w.get("additionalProperties").unwrap_or(&TRUE);
        let r_extra = r.get("additionalProperties").unwrap_or(&TRUE);
        let patterns = w.contains_key("patternProperties") || r.contains_key("patternProperties");
        if patterns && w.get("patternProperties") != r.get("patternProperties") {
            self.report(
                "keyword_changed",
                &format!("{path}/patternProperties"),
                "patternProperties was added or changed, and its effect cannot be compared".into(),
            );
            return;
        }
        for (name, r_schema) in r_props {
            let at = format!("{path}/properties/{}", escape(name));
            match w_props.get(name) {
                Some(w_schema) => self.check(w_schema, r_schema, &at),
                None if is_true(w_extra) && !is_true(r_schema) => self.report(
                    "property_added_to_open_model",
                    &at,
                    format!(
                        "{name:?} is constrained now, but it was undeclared in an open content model, where any value \
                         was accepted under that name (close the earlier model with additionalProperties: false, or \
                         change compatibility)"
                    ),
                ),
                None => self.check(w_extra, r_schema, &at),
            }
        }
        for (name, w_schema) in w_props {
            if r_props.contains_key(name) {
                continue;
            }
            let at = format!("{path}/properties/{}", escape(name));
            if r_extra == &Value::Bool(false) {
                self.report(
                    "property_removed_from_closed_model",
                    &at,
                    format!(
                        "{name:?} was removed while additionalProperties is false, so values that have it are refused"
                    ),
                );
            } else {
                self.check(w_schema, r_extra, &at);
            }
        }
        if !is_true(r_extra) {
            self.check(w_extra, r_extra, &format!("{path}/additionalProperties"));
        }
    }

    /// A lower bound (`minLength`, ...) that may only stay or fall.
    fn lower(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str, keyword: &'static str) {
        if let Some(m) = number(r, keyword)
            && number(w, keyword).unwrap_or(0.0) < m
        {
            self.bound(path, keyword, "fewer");
        }
    }

    /// An upper bound (`maxLength`, ...) that may only stay or rise.
    fn upper(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str, keyword: &'static str) {
        if let Some(m) = number(r, keyword)
            && number(w, keyword).is_none_or(|x| x > m)
        {
            self.bound(path, keyword, "more");
        }
    }

    fn bound(&mut self, path: &str, keyword: &str, what: &str) {
        self.report(
            "bound_tightened",
            &format!("{path}/{keyword}"),
            format!("{keyword} was added or tightened: values with {what} were accepted"),
        );
    }

    /// Keywords this checker does not reason about must be the same on both sides.
    fn unchanged_keywords(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str) {
        for (keyword, value) in r {
            let keyword = keyword.as_str();
            let checked = ["contains", "minContains", "maxContains", "propertyNames", "dependentRequired"];
            let opaque = ["dependentSchemas", "unevaluatedProperties", "unevaluatedItems"];
            let compare = checked.contains(&keyword)
                || opaque.contains(&keyword)
                || !(UNDERSTOOD.contains(&keyword) || ANNOTATIONS.contains(&keyword));
            if compare && w.get(keyword) != Some(value) {
                self.report(
                    "keyword_changed",
                    &format!("{path}/{}", escape(keyword)),
                    format!("{keyword} was added or changed, and its effect cannot be compared"),
                );
            }
        }
    }
}

static TRUE: Value = Value::Bool(true);
static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

/// Whether a schema accepts everything (`true`, `{}` or only annotations).
fn is_true(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(m) => m.keys().all(|k| ANNOTATIONS.contains(&k.as_str())),
        _ => false,
    }
}

fn contains_ref(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.iter().any(|(k, v)| k == "$ref" || contains_ref(v)),
        Value::Array(items) => items.iter().any(contains_ref),
        _ => false,
    }
}

/// A local reference (`#`, `#/$defs/name`) within `root`.
fn resolve<'v>(root: &'v Value, target: &str) -> Option<&'v Value> {
    let pointer = target.strip_prefix('#')?;
    let decoded = percent_encoding::percent_decode_str(pointer).decode_utf8().ok()?;
    root.pointer(&decoded)
}

/// A property name as a JSON pointer segment.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// The values a schema with `enum` or `const` allows (at most these).
fn finite_values(schema: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(c) = schema.get("const") {
        return Some(vec![c]);
    }
    schema.get("enum").and_then(Value::as_array).map(|values| values.iter().collect())
}

/// `type` as a set; `None` when absent (any type).
fn type_set(value: Option<&Value>) -> Option<BTreeSet<&'static str>> {
    let names: Vec<&str> = match value? {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    Some(TYPES.iter().copied().filter(|t| names.contains(t)).collect())
}

fn list(types: &BTreeSet<&str>) -> String {
    types.iter().copied().collect::<Vec<_>>().join(", ")
}

fn number(schema: &Map<String, Value>, keyword: &str) -> Option<f64> {
    schema.get(keyword).and_then(Value::as_f64)
}

fn strings(value: Option<&Value>) -> BTreeSet<&str> {
    value.and_then(Value::as_array).map(|items| items.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// The JSON type of a value, as `type` names it (an integral number is an integer).
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value against the reader's `type`, `enum` and `const` only, where the reader cannot be
/// compiled alone (it has references).
fn shallow_accepts(r: &Map<String, Value>, value: &Value) -> bool {
    let t = type_of(value);
    let typed = type_set(r.get("type")).is_none_or(|set| set.contains(t) || (t == "integer" && set.contains("number")));
    let listed = finite_values(r).is_none_or(|values| values.contains(&value));
    typed && listed
}

/// Whether no value can be accepted by both: different types, or a required property whose
/// allowed values (`const`/`enum`) do not meet (a tagged union).
fn disjoint(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return false };
    if let (Some(ta), Some(tb)) = (type_set(a.get("type")), type_set(b.get("type"))) {
        let meets = ta.iter().any(|t| tb.contains(t) || (*t == "integer" && tb.contains("number")))
            || (ta.contains("number") && tb.contains("integer"));
        if !meets {
            return true;
        }
    }
    let required =
        |m: &Map<String, Value>| strings(m.get("required")).into_iter().map(str::to_owned).collect::<Vec<_>>();
    let (ra, rb) = (required(a), required(b));
    let empty = Map::new();
    let props = |m: &Map<String, Value>| {
        m.get("properties").and_then(Value::as_object).cloned().unwrap_or_else(|| empty.clone())
    };
    let (pa, pb) = (props(a), props(b));
    ra.iter().filter(|name| rb.contains(name)).any(|name| {
        let values = |p: &Map<String, Value>| {
            p.get(name)
                .and_then(Value::as_object)
                .and_then(|s| finite_values(s).map(|v| v.into_iter().cloned().collect::<Vec<_>>()))
        };
        match (values(&pa), values(&pb)) {
            (Some(va), Some(vb)) => va.iter().all(|v| !vb.contains(v)),
            _ => false,
        }
    })
}
