//! A policy's `imports`: the other policies whose entries take effect in
//! it, as Ditto 3.x has them (`PolicyImports`, `PolicyImport`,
//! `EffectedImports`).
//!
//! ```json
//! "imports": {
//!   "org.acme:template": { "entries": ["EXPLICIT"] },
//!   "org.acme:other": {}
//! }
//! ```
//!
//! Which entries of an imported policy an import brings in is the imported
//! entry's `importable` ([`Importable`]): `implicit` ones always,
//! `explicit` ones when the import lists their label in `entries`, `never`
//! ones not at all (Ditto's `PolicyImporter.importEntry`). Only the
//! imported policy's own entries are brought in: what it imports itself is
//! not (Ditto resolves one level unless an import names
//! `transitiveImports`, which Ferry keeps and returns but does not follow).

use super::entry::{Importable, PolicyEntry};
use super::errors::wrong_type;
use super::label::Label;
use super::Policy;
use crate::error::DittoError;
use crate::id::PolicyId;
use serde_json::{Map, Value};

/// Imports one policy may have: Ditto's `ditto.limits.policies.imports-limit`
/// default. Every use of a policy with imports looks each imported policy
/// up, so this also bounds what one permission check costs.
pub const IMPORTS_MAX: usize = 10;

/// One import: which explicit entries it asks for. The default is `{}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyImport {
    /// `entries`, duplicates dropped; `None` when the import was given as
    /// `{}`, which Ditto prints back as `{}` (any other object as
    /// `{"entries": [...]}`).
    entries: Option<Vec<Label>>,
    /// Ditto 3.9's `transitiveImports`: checked, kept and returned; not
    /// followed (see the module doc).
    transitive: Vec<PolicyId>,
}

impl PolicyImport {
    /// Ditto's `PolicyImport.fromJson`: an object, whose `entries` are the
    /// string elements of an array (others are skipped, as Ditto skips
    /// them), each a valid label; unknown fields are ignored.
    pub fn from_json(imported: &PolicyId, value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(DittoError::json_parse(format!(
                "The value of the policy import of the 'imported policy' with ID '{imported}' is missing or not an object."
            )));
        };
        if object.is_empty() {
            return Ok(PolicyImport { entries: None, transitive: Vec::new() });
        }
        let entries = match object.get("entries") {
            None => Vec::new(),
            Some(Value::Array(labels)) => labels_from_json(labels)?,
            Some(other) => return Err(wrong_type(other, "/entries", "JsonArray")),
        };
        let transitive = match object.get("transitiveImports") {
            None => Vec::new(),
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|id| match id {
                    Value::String(id) => PolicyId::parse(id),
                    other => Err(DittoError::policy_import_transitive_not_a_string(other)),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(wrong_type(other, "/transitiveImports", "JsonArray")),
        };
        Ok(PolicyImport { entries: Some(entries), transitive })
    }

    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        if self.entries.is_some() {
            object.insert("entries".into(), self.entries_json());
        }
        if !self.transitive.is_empty() {
            let ids = self.transitive.iter().map(|id| Value::String(id.to_string())).collect();
            object.insert("transitiveImports".into(), Value::Array(ids));
        }
        Value::Object(object)
    }

    /// `…/imports/{id}/entries`: the labels asked for, `[]` when none.
    pub fn entries_json(&self) -> Value {
        let labels = self.labels().map(|label| Value::String(label.to_string())).collect();
        Value::Array(labels)
    }

    /// The same import asking for `labels` instead (`PUT …/entries`; its
    /// `transitiveImports` are kept, as Ditto's strategy keeps them).
    pub fn with_entries(&self, body: &Value) -> Result<PolicyImport, DittoError> {
        let Value::Array(labels) = body else {
            return Err(DittoError::json_invalid(body));
        };
        Ok(PolicyImport {
            entries: Some(labels_from_json(labels)?),
            transitive: self.transitive.clone(),
        })
    }

    fn labels(&self) -> impl Iterator<Item = &Label> {
        self.entries.iter().flatten()
    }

    /// The entries of `imported` this import brings in.
    pub fn entries_from<'a>(
        &'a self,
        imported: &'a Policy,
    ) -> impl Iterator<Item = &'a PolicyEntry> {
        imported.entries().filter(move |entry| match entry.importable {
            Importable::Implicit => true,
            Importable::Explicit => self.labels().any(|label| *label == entry.label),
            Importable::Never => false,
        })
    }

    /// The labels of `imported` whose entries a caller must be able to READ
    /// to create or change this import, as Ditto's
    /// `PolicyImportsPreEnforcer` collects them: every implicit entry and
    /// every label the import lists, whether or not it names an entry.
    pub fn labels_to_read<'a>(&'a self, imported: &'a Policy) -> impl Iterator<Item = &'a Label> {
        let implicit = imported
            .entries()
            .filter(|entry| entry.importable == Importable::Implicit)
            .map(|entry| &entry.label);
        implicit.chain(self.labels())
    }
}

/// A policy's imports, in the order they were written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyImports(Vec<(PolicyId, PolicyImport)>);

impl PolicyImports {
    /// Ditto's `PolicyImports.fromJson`: an object of policy ids. The
    /// rules about the importing policy (not itself, at most
    /// [`IMPORTS_MAX`]) are [`PolicyImports::check`]'s.
    pub fn from_json(value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(wrong_type(value, "/imports", "JsonObject"));
        };
        let mut imports = Vec::with_capacity(object.len());
        for (id, import) in object {
            let id = PolicyId::parse(id)?;
            let import = PolicyImport::from_json(&id, import)?;
            imports.push((id, import));
        }
        Ok(PolicyImports(imports))
    }

    pub fn to_json(&self) -> Value {
        Value::Object(
            self.0.iter().map(|(id, import)| (id.to_string(), import.to_json())).collect(),
        )
    }

    /// Ditto's `PolicyImportsValidator`: no import of `policy_id` itself,
    /// directly or in `transitiveImports`.
    pub fn check(&self, policy_id: &str) -> Result<(), DittoError> {
        self.iter().try_for_each(|(id, import)| check_import(policy_id, id, import))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&PolicyId, &PolicyImport)> {
        self.0.iter().map(|(id, import)| (id, import))
    }

    pub fn get(&self, id: &PolicyId) -> Option<&PolicyImport> {
        self.iter().find(|(known, _)| *known == id).map(|(_, import)| import)
    }

    /// Puts `import` in place of the import of `id`, or adds it at the
    /// end; true when it was added.
    pub fn set(&mut self, id: PolicyId, import: PolicyImport) -> bool {
        match self.0.iter_mut().find(|(known, _)| *known == id) {
            Some((_, existing)) => {
                *existing = import;
                false
            }
            None => {
                self.0.push((id, import));
                true
            }
        }
    }

    pub fn remove(&mut self, id: &PolicyId) {
        self.0.retain(|(known, _)| known != id);
    }
}

/// `PolicyImportsValidator.validatePolicyImport`.
pub fn check_import(
    policy_id: &str,
    imported: &PolicyId,
    import: &PolicyImport,
) -> Result<(), DittoError> {
    if imported.as_str() == policy_id {
        return Err(DittoError::policy_import_of_itself());
    }
    if import.transitive.iter().any(|id| id.as_str() == policy_id) {
        return Err(DittoError::policy_import_transitive_of_itself(policy_id));
    }
    Ok(())
}

/// Ditto's `ImportedLabels` from JSON: string elements only, each a label
/// (so never one of the reserved `imported` prefixes), duplicates dropped.
fn labels_from_json(values: &[Value]) -> Result<Vec<Label>, DittoError> {
    let mut labels: Vec<Label> = Vec::new();
    for text in values.iter().filter_map(Value::as_str) {
        let label = Label::parse(text)?;
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(text: &str) -> PolicyId {
        PolicyId::parse(text).unwrap()
    }

    #[test]
    fn imports_print_back_as_ditto_prints_them() {
        let value = json!({
            "ns:a": {},
            "ns:b": {"entries": ["X", 1, "X", "Y"]},
            "ns:c": {"whatever": true},
            "ns:d": {"entries": [], "transitiveImports": ["ns:e"]},
        });
        let imports = PolicyImports::from_json(&value).unwrap();
        assert_eq!(
            imports.to_json(),
            json!({
                "ns:a": {},
                "ns:b": {"entries": ["X", "Y"]},
                "ns:c": {"entries": []},
                "ns:d": {"entries": [], "transitiveImports": ["ns:e"]},
            })
        );
        let keys: Vec<&str> = imports.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(keys, ["ns:a", "ns:b", "ns:c", "ns:d"]);
    }

    #[test]
    fn malformed_imports_carry_dittos_codes() {
        let cases = [
            (json!([]), "json.invalid"),
            (json!({"bad": {}}), "policies:id.invalid"),
            (json!({"ns:a": []}), "json.invalid"),
            (json!({"ns:a": {"entries": {}}}), "json.invalid"),
            (json!({"ns:a": {"entries": ["imported-x"]}}), "policies:label.invalid"),
            (json!({"ns:a": {"entries": ["a/b"]}}), "policies:entry.invalid"),
            (json!({"ns:a": {"transitiveImports": [1]}}), "policies:import.invalid"),
            (json!({"ns:a": {"transitiveImports": ["bad"]}}), "policies:id.invalid"),
        ];
        for (value, code) in cases {
            assert_eq!(PolicyImports::from_json(&value).unwrap_err().error, code, "{value}");
        }
        let error = PolicyImports::from_json(&json!({"ns:a": 1})).unwrap_err();
        assert_eq!(
            error.message,
            "The value of the policy import of the 'imported policy' with ID 'ns:a' is missing or not an object."
        );
    }

    #[test]
    fn a_policy_may_not_import_itself() {
        let direct = PolicyImports::from_json(&json!({"ns:p": {}})).unwrap();
        assert_eq!(direct.check("ns:p").unwrap_err().error, "policies:import.invalid");
        let transitive =
            PolicyImports::from_json(&json!({"ns:a": {"transitiveImports": ["ns:p"]}})).unwrap();
        let error = transitive.check("ns:p").unwrap_err();
        assert_eq!(
            error.message,
            "The policy import contains a transitive resolution of the policy itself."
        );
        assert!(transitive.check("ns:other").is_ok());
    }

    #[test]
    fn an_import_brings_in_implicit_entries_and_the_explicit_ones_it_lists() {
        let imported = Policy::from_json(
            "ns:template",
            &json!({"entries": {
                "IMPLICIT": {"importable": "implicit"},
                "DEFAULT": {},
                "EXPLICIT": {"importable": "explicit"},
                "OTHER": {"importable": "explicit"},
                "NEVER": {"importable": "never"},
            }}),
        )
        .unwrap();
        let labels = |import: &PolicyImport| -> Vec<String> {
            import.entries_from(&imported).map(|e| e.label.to_string()).collect()
        };
        let bare = PolicyImport::from_json(&id("ns:template"), &json!({})).unwrap();
        assert_eq!(labels(&bare), ["IMPLICIT", "DEFAULT"]);
        let listed = PolicyImport::from_json(
            &id("ns:template"),
            &json!({"entries": ["EXPLICIT", "NEVER", "MISSING"]}),
        )
        .unwrap();
        assert_eq!(labels(&listed), ["IMPLICIT", "DEFAULT", "EXPLICIT"]);
        let to_read: Vec<&str> = listed.labels_to_read(&imported).map(Label::as_str).collect();
        assert_eq!(to_read, ["IMPLICIT", "DEFAULT", "EXPLICIT", "NEVER", "MISSING"]);
    }

    #[test]
    fn setting_an_import_keeps_the_order_and_entries_keep_transitive_imports() {
        let mut imports = PolicyImports::from_json(
            &json!({"ns:a": {}, "ns:b": {"entries": ["X"], "transitiveImports": ["ns:c"]}}),
        )
        .unwrap();
        assert!(!imports.set(
            id("ns:a"),
            PolicyImport::from_json(&id("ns:a"), &json!({"entries": ["Y"]})).unwrap()
        ));
        assert!(imports.set(id("ns:z"), PolicyImport::from_json(&id("ns:z"), &json!({})).unwrap()));
        let b = imports.get(&id("ns:b")).unwrap().with_entries(&json!(["Z"])).unwrap();
        assert_eq!(b.to_json(), json!({"entries": ["Z"], "transitiveImports": ["ns:c"]}));
        assert_eq!(b.with_entries(&json!({})).unwrap_err().error, "json.invalid");
        imports.remove(&id("ns:b"));
        assert_eq!(imports.to_json(), json!({"ns:a": {"entries": ["Y"]}, "ns:z": {}}));
    }
}
