//! Policies as Eclipse Ditto has them: who may READ, WRITE or EXECUTE
//! which part of a thing, of the policy itself, and of the messages sent
//! to a thing.
//!
//! A policy is a set of labelled entries; each entry names subjects
//! (`issuer:id`, as the authenticator proved them) and resources
//! (`type:/path`), and each resource grants and revokes permissions:
//!
//! ```json
//! { "policyId": "org.acme:lamp",
//!   "entries": {
//!     "OWNER":  { "subjects":  { "nginx:alice": { "type": "generated" } },
//!                 "resources": { "thing:/":  { "grant": ["READ", "WRITE"], "revoke": [] },
//!                                "policy:/": { "grant": ["READ", "WRITE"], "revoke": [] } } },
//!     "GUEST":  { "subjects":  { "nginx:bob": { "type": "generated" } },
//!                 "resources": { "thing:/":                  { "grant": ["READ"], "revoke": [] },
//!                                "thing:/attributes/secret": { "grant": [], "revoke": ["READ"] },
//!                                "thing:/attributes/secret/hint": { "grant": ["READ"], "revoke": [] } } } } }
//! ```
//!
//! How a decision is made (Ditto's tree-based enforcer, which
//! [`Enforcer`] compiles): a grant or revoke holds for its path and
//! everything below it. Along the path asked about, the deepest grant or
//! revoke wins, and a revoke wins over a grant at the same depth, whichever
//! entry or subject of the caller they come from. So above bob may read
//! the whole thing but `/attributes/secret`, except `/attributes/secret/hint`,
//! which the deeper grant gives back. Asking for a path as a whole
//! ([`Caller::has_permission`], used for writes) also fails when anything
//! below it is revoked; asking whether anything at or below a path is
//! readable ([`Caller::has_permission_on_any_level_below`]) is what tells
//! a 404 from a partial view ([`Caller::view`]). WRITE does not imply READ.
//!
//! `imports` name other policies whose entries take effect in this one
//! (`imports.rs`); the service compiles them into the enforcer with the
//! policy's own entries.
//!
//! What is kept but not evaluated: an import's `transitiveImports`, and
//! Ditto 3.9's entry fields `namespaces`, `allowedAdditions` and
//! `references` (stored and returned as written). Subjects' `expiry` and
//! `announcement` are acted on by `announcements.rs`.

mod announcement;
mod compact;
mod enforcer;
mod entry;
mod errors;
mod imports;
mod label;
pub mod requester;
mod resource;
mod subject;
mod timestamp;

pub use announcement::SubjectAnnouncement;
pub use compact::CompactPolicy;
pub use enforcer::{Caller, Enforcer};
pub use entry::{Importable, PolicyEntry};
pub use imports::{PolicyImport, PolicyImports, IMPORTS_MAX};
pub use label::Label;
pub use resource::{Permission, Permissions, Resource, ResourceKey, Resources};
pub use subject::{Subject, SubjectId, Subjects};
pub(crate) use timestamp::civil_from_days;
pub use timestamp::Timestamp;

use crate::error::DittoError;
use crate::id::PolicyId;
use errors::wrong_type;
use serde_json::{Map, Value};

/// What the persistence writes beside the policy, returned only when a
/// caller asks for the field (`fields=_revision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Housekeeping {
    pub revision: u64,
    pub created: Option<Timestamp>,
    pub modified: Option<Timestamp>,
}

/// The limits a write is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyLimits {
    /// The policy's JSON, counted in characters as Ditto counts it
    /// (`ditto.limits.policies.max-size`, 100k by default).
    pub max_bytes: u64,
    /// A subject's `expiry` is rounded up to this grid before it is stored
    /// (`policies.subject-expiry-granularity`, 1h by default); 0 keeps it.
    pub subject_expiry_granularity_seconds: i64,
}

impl Default for PolicyLimits {
    fn default() -> Self {
        PolicyLimits { max_bytes: 100 * 1024, subject_expiry_granularity_seconds: 3_600 }
    }
}

/// How a write landed, for the status of its answer: Ditto answers 201
/// with the new value when the resource did not exist, 204 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Created,
    Modified,
}

impl Written {
    pub fn status(self) -> u16 {
        match self {
            Written::Created => 201,
            Written::Modified => 204,
        }
    }
}

/// A policy. Entries keep the order they were written in, as Ditto's
/// `LinkedHashMap` does, so a policy prints back as it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `namespace:name`, checked as a thing id is. A `String` until the
    /// shared `PolicyId` type of `id.rs` takes its place.
    policy_id: String,
    /// `None` when the policy was never given any, so that it prints
    /// back without the field.
    imports: Option<PolicyImports>,
    entries: Vec<PolicyEntry>,
    pub housekeeping: Housekeeping,
}

/// Ditto's namespaced entity id: a namespace of `[a-zA-Z]\w*` parts joined
/// by `.` or `-` (or none), a colon, and a name without slashes or control
/// characters.
fn is_namespaced_id(id: &str) -> bool {
    let Some((namespace, name)) = id.split_once(':') else {
        return false;
    };
    let part_ok = |part: &str| {
        let mut chars = part.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let namespace_ok = namespace.is_empty() || namespace.split(['.', '-']).all(part_ok);
    let name_ok = !name.is_empty()
        && !name.chars().any(|c| c == '/' || matches!(c, '\u{0}'..='\u{1F}' | '\u{7F}'..='\u{FF}'));
    namespace_ok && name_ok
}

impl Policy {
    /// An empty policy; an id that is not `namespace:name` is refused.
    pub fn new(policy_id: &str) -> Result<Self, DittoError> {
        if !is_namespaced_id(policy_id) {
            return Err(DittoError::policy_id_invalid(policy_id));
        }
        Ok(Policy {
            policy_id: policy_id.to_string(),
            imports: None,
            entries: Vec::new(),
            housekeeping: Housekeeping::default(),
        })
    }

    /// The policy Ditto creates for a thing created without one: label
    /// `DEFAULT`, the creator's first authorization subject (type
    /// `generated`) with READ and WRITE on `thing:/`, `policy:/` and
    /// `message:/`, under the thing's id.
    pub fn default_for_thing(thing_id: &str, creator: SubjectId) -> Result<Self, DittoError> {
        let mut policy = Policy::new(thing_id)?;
        let mut subjects = Subjects::default();
        subjects.set(Subject::generated(creator));
        let mut resources = Resources::default();
        for resource_type in ["thing", "policy", "message"] {
            resources.set(Resource {
                key: ResourceKey::new(resource_type, crate::pointer::JsonPointer::root()),
                grant: Permissions::new(["READ", "WRITE"]),
                revoke: Permissions::default(),
            });
        }
        let label = Label::parse("DEFAULT")?;
        policy.entries.push(PolicyEntry::new(label, subjects, resources));
        Ok(policy)
    }

    /// Reads a policy body for `policy_id` (the id from the URL): a
    /// `policyId` in the body must be the same. Ditto's `Policy.fromJson`:
    /// `entries` may be left out, unknown and housekeeping fields are
    /// ignored. Nothing beyond the model is checked here; the commands
    /// below add the size, expiry and lock-out rules.
    pub fn from_json(policy_id: &str, value: &Value) -> Result<Self, DittoError> {
        let mut policy = Policy::new(policy_id)?;
        let Some(object) = value.as_object() else {
            return Err(DittoError::json_parse(format!("<{value}> is not a JSON object!")));
        };
        match object.get("policyId") {
            None => {}
            Some(Value::String(id)) if id == policy_id => {}
            Some(Value::String(_)) => return Err(DittoError::policy_id_not_settable()),
            Some(other) => return Err(wrong_type(other, "/policyId", "String")),
        }
        policy.imports = object.get("imports").map(PolicyImports::from_json).transpose()?;
        if let Some(entries) = object.get("entries") {
            policy.entries = entries_from_json(entries)?;
        }
        Ok(policy)
    }

    pub fn policy_id(&self) -> &str {
        &self.policy_id
    }

    pub fn entries(&self) -> impl Iterator<Item = &PolicyEntry> {
        self.entries.iter()
    }

    /// The policies this one imports entries of, with what each brings in.
    pub fn imports(&self) -> impl Iterator<Item = (&PolicyId, &PolicyImport)> {
        self.imports.iter().flat_map(PolicyImports::iter)
    }

    /// `GET …/imports`: `{}` for a policy without any, as Ditto answers.
    pub fn imports_json(&self) -> Value {
        self.imports.as_ref().map_or_else(|| Value::Object(Map::new()), PolicyImports::to_json)
    }

    /// `GET …/imports/{importedPolicyId}`; also the base of `…/entries`.
    pub fn import(&self, id: &PolicyId) -> Result<&PolicyImport, DittoError> {
        self.imports
            .as_ref()
            .and_then(|imports| imports.get(id))
            .ok_or_else(|| DittoError::policy_import_not_found(&self.policy_id, id.as_str()))
    }

    /// The regular fields in Ditto's order: `policyId`, `imports`,
    /// `entries`.
    pub fn to_json(&self) -> Value {
        Value::Object(self.fields(false))
    }

    /// Every field, housekeeping first as Ditto prints it (`_revision`,
    /// `_modified`, `_created`, `_namespace`), for a field selection to
    /// pick from.
    pub fn to_json_with_housekeeping(&self) -> Value {
        Value::Object(self.fields(true))
    }

    fn fields(&self, housekeeping: bool) -> Map<String, Value> {
        let mut object = Map::new();
        if housekeeping {
            object.insert("_revision".into(), Value::from(self.housekeeping.revision));
            if let Some(modified) = self.housekeeping.modified {
                object.insert("_modified".into(), Value::String(modified.to_string()));
            }
            if let Some(created) = self.housekeeping.created {
                object.insert("_created".into(), Value::String(created.to_string()));
            }
            let namespace = self.policy_id.split_once(':').map_or("", |(ns, _)| ns);
            object.insert("_namespace".into(), Value::String(namespace.to_string()));
        }
        object.insert("policyId".into(), Value::String(self.policy_id.clone()));
        if let Some(imports) = &self.imports {
            object.insert("imports".into(), imports.to_json());
        }
        object.insert("entries".into(), self.entries_json());
        object
    }

    /// `GET …/entries`.
    pub fn entries_json(&self) -> Value {
        Value::Object(self.entries.iter().map(|e| (e.label.to_string(), e.to_json())).collect())
    }

    /// `GET …/entries/{label}`; also the base of the narrower reads.
    pub fn entry(&self, label: &Label) -> Result<&PolicyEntry, DittoError> {
        self.entries
            .iter()
            .find(|e| &e.label == label)
            .ok_or_else(|| DittoError::policy_entry_not_found(&self.policy_id, label.as_str()))
    }

    /// `GET …/entries/{label}/subjects/{subjectId}`.
    pub fn subject(&self, label: &Label, id: &SubjectId) -> Result<&Subject, DittoError> {
        self.entry(label)?.subjects.get(id).ok_or_else(|| {
            DittoError::subject_not_found(&self.policy_id, label.as_str(), id.as_str())
        })
    }

    /// `GET …/entries/{label}/resources/{resourcePath}`.
    pub fn resource(&self, label: &Label, key: &ResourceKey) -> Result<&Resource, DittoError> {
        self.entry(label)?.resources.get(key).ok_or_else(|| {
            DittoError::resource_not_found(&self.policy_id, label.as_str(), &key.to_string())
        })
    }

    /// Ditto's `PoliciesValidator`: some subject without an expiry must
    /// hold WRITE on exactly `policy:/` and not be in an entry that
    /// revokes it there, or nobody could ever change the policy again. A
    /// policy with imports is not checked, as in Ditto. Returns the reason
    /// when the rule is broken.
    fn lockout_reason(&self) -> Option<String> {
        if self.imports.as_ref().is_some_and(|imports| !imports.is_empty()) {
            return None;
        }
        let root = ResourceKey::new("policy", crate::pointer::JsonPointer::root());
        let on_root = |entry: &PolicyEntry, revoked: bool| {
            entry.resources.get(&root).is_some_and(|r| {
                let permissions = if revoked { &r.revoke } else { &r.grant };
                permissions.contains("WRITE")
            })
        };
        let revoking: Vec<&Subject> = self
            .entries
            .iter()
            .filter(|e| on_root(e, true))
            .flat_map(|e| e.subjects.iter())
            .collect();
        let writer_remains = self
            .entries
            .iter()
            .filter(|e| on_root(e, false))
            .flat_map(|e| e.subjects.iter())
            .any(|s| s.expiry.is_none() && !revoking.contains(&s));
        (!writer_remains).then(|| {
            "It must contain at least one permanent Subject with permission(s) <[WRITE]> on resource <policy:/>!"
                .to_string()
        })
    }

    /// Whether any subject has an `expiry` or an `announcement`.
    pub fn has_timed_subjects(&self) -> bool {
        self.entries.iter().flat_map(|entry| entry.subjects.iter()).any(Subject::is_timed)
    }

    /// Drops the subjects whose expiry has passed, as Ditto's policy
    /// actor does at expiry (`announcements.rs`); true when any was
    /// dropped. The enforcer already ignores them, so this keeps what is
    /// stored and returned tidy, and ends their announcements.
    pub fn remove_expired_subjects(&mut self, now: Timestamp) -> bool {
        let mut removed = false;
        for entry in &mut self.entries {
            let expired: Vec<SubjectId> =
                entry.subjects.iter().filter(|s| s.is_expired(now)).map(|s| s.id.clone()).collect();
            for id in &expired {
                entry.subjects.remove(id);
            }
            removed |= !expired.is_empty();
        }
        removed
    }

    fn entry_mut(&mut self, label: &Label) -> Result<&mut PolicyEntry, DittoError> {
        let policy_id = &self.policy_id;
        self.entries
            .iter_mut()
            .find(|e| &e.label == label)
            .ok_or_else(|| DittoError::policy_entry_not_found(policy_id, label.as_str()))
    }

    /// Puts `candidate` in place of `self` if it passes Ditto's checks in
    /// Ditto's order: the imports' (no import of itself, at most
    /// [`IMPORTS_MAX`]: Ditto's model refuses them while parsing), size,
    /// then subjects written with an expiry already past (after rounding),
    /// then the lock-out rule, whose failure `invalid` turns into the error
    /// of the command's level.
    fn commit(
        &mut self,
        mut candidate: Policy,
        written: Writes<'_>,
        limits: &PolicyLimits,
        now: Timestamp,
        lockout: Lockout<'_>,
    ) -> Result<(), DittoError> {
        if let Some(imports) = &candidate.imports {
            imports.check(&candidate.policy_id)?;
            if imports.len() > IMPORTS_MAX {
                return Err(DittoError::policy_imports_too_large(
                    &candidate.policy_id,
                    IMPORTS_MAX,
                ));
            }
        }
        let size = serde_json::to_string(&candidate.to_json())
            .map_err(DittoError::json_invalid)?
            .encode_utf16()
            .count() as u64;
        if size > limits.max_bytes {
            return Err(DittoError::policy_too_large(size, limits.max_bytes));
        }
        // Only the subjects this command writes are rounded and checked:
        // stored ones were checked when they were written.
        for entry in candidate.entries.iter_mut() {
            for subject in entry.subjects.iter_mut().filter(|s| written.covers(&entry.label, &s.id))
            {
                if let Some(expiry) = subject.expiry {
                    let rounded = expiry.round_up(limits.subject_expiry_granularity_seconds);
                    if rounded < now {
                        return Err(DittoError::subject_expiry_in_the_past(&rounded.to_string()));
                    }
                    subject.expiry = Some(rounded);
                }
                subject.announcement =
                    subject.announcement.take().map(SubjectAnnouncement::rounded);
            }
        }
        if let Some(reason) = lockout.applies().then(|| candidate.lockout_reason()).flatten() {
            return Err(lockout.error(&self.policy_id, reason));
        }
        candidate.housekeeping = self.housekeeping;
        *self = candidate;
        Ok(())
    }

    /// `PUT /policies/{id}` on a policy that does not exist yet: the
    /// body's checks, then the write rules. Answered with 201.
    pub fn create(
        policy_id: &str,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Self, DittoError> {
        let candidate = Policy::from_json(policy_id, body)?;
        let mut policy = Policy::new(policy_id)?;
        policy.commit(candidate, Writes::Everything, limits, now, Lockout::Whole)?;
        Ok(policy)
    }

    /// `PUT /policies/{id}` on an existing policy (204).
    pub fn modify(
        &mut self,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        let candidate = Policy::from_json(&self.policy_id, body)?;
        self.commit(candidate, Writes::Everything, limits, now, Lockout::Whole)?;
        Ok(Written::Modified)
    }

    /// `PUT …/entries`: all entries replaced (204).
    pub fn modify_entries(
        &mut self,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        let mut candidate = self.clone();
        candidate.entries = entries_from_json(body)?;
        self.commit(candidate, Writes::Everything, limits, now, Lockout::Whole)?;
        Ok(Written::Modified)
    }

    /// `PUT …/entries/{label}`: 201 for a new label, 204 otherwise.
    pub fn modify_entry(
        &mut self,
        label: &Label,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        let entry = PolicyEntry::from_json(label.clone(), body)?;
        let mut candidate = self.clone();
        let written = match candidate.entries.iter_mut().find(|e| &e.label == label) {
            Some(existing) => {
                *existing = entry;
                Written::Modified
            }
            None => {
                candidate.entries.push(entry);
                Written::Created
            }
        };
        self.commit(candidate, Writes::Entry(label), limits, now, Lockout::Entry(label))?;
        Ok(written)
    }

    /// `DELETE …/entries/{label}` (204).
    pub fn delete_entry(
        &mut self,
        label: &Label,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<(), DittoError> {
        self.entry(label)?;
        let mut candidate = self.clone();
        candidate.entries.retain(|e| &e.label != label);
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Entry(label))
    }

    /// `PUT …/entries/{label}/subjects`: the entry's subjects replaced
    /// (204; the entry must exist).
    pub fn modify_subjects(
        &mut self,
        label: &Label,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        self.entry(label)?;
        let subjects = Subjects::from_json(body)?;
        let mut candidate = self.clone();
        candidate.entry_mut(label)?.subjects = subjects;
        self.commit(candidate, Writes::Entry(label), limits, now, Lockout::Entry(label))?;
        Ok(Written::Modified)
    }

    /// `PUT …/entries/{label}/subjects/{subjectId}`: 201 or 204.
    pub fn modify_subject(
        &mut self,
        label: &Label,
        id: &SubjectId,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        self.entry(label)?;
        let subject = Subject::from_json(id.clone(), body)?;
        let mut candidate = self.clone();
        let created = candidate.entry_mut(label)?.subjects.set(subject);
        self.commit(candidate, Writes::Subject(label, id), limits, now, Lockout::Entry(label))?;
        Ok(if created { Written::Created } else { Written::Modified })
    }

    /// `DELETE …/entries/{label}/subjects/{subjectId}` (204).
    pub fn delete_subject(
        &mut self,
        label: &Label,
        id: &SubjectId,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<(), DittoError> {
        self.subject(label, id)?;
        let mut candidate = self.clone();
        candidate.entry_mut(label)?.subjects.remove(id);
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Entry(label))
    }

    /// `PUT …/entries/{label}/resources`: the entry's resources replaced
    /// (204; the entry must exist).
    pub fn modify_resources(
        &mut self,
        label: &Label,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        self.entry(label)?;
        let resources = Resources::from_json(body)?;
        let mut candidate = self.clone();
        candidate.entry_mut(label)?.resources = resources;
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Entry(label))?;
        Ok(Written::Modified)
    }

    /// `PUT …/entries/{label}/resources/{resourcePath}`: 201 or 204.
    pub fn modify_resource(
        &mut self,
        label: &Label,
        key: &ResourceKey,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        self.entry(label)?;
        let resource = Resource::from_json(key.clone(), body)?;
        let mut candidate = self.clone();
        let created = candidate.entry_mut(label)?.resources.set(resource);
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Entry(label))?;
        Ok(if created { Written::Created } else { Written::Modified })
    }

    /// `DELETE …/entries/{label}/resources/{resourcePath}` (204).
    pub fn delete_resource(
        &mut self,
        label: &Label,
        key: &ResourceKey,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<(), DittoError> {
        self.resource(label, key)?;
        let mut candidate = self.clone();
        candidate.entry_mut(label)?.resources.remove(key);
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Entry(label))
    }
    /// `PUT …/imports`: all imports replaced (204).
    pub fn modify_imports(
        &mut self,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        let imports = PolicyImports::from_json(body)?;
        imports.check(&self.policy_id)?;
        if imports.len() > IMPORTS_MAX {
            return Err(DittoError::policy_imports_too_many(imports.len(), IMPORTS_MAX));
        }
        let mut candidate = self.clone();
        candidate.imports = Some(imports);
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Unchecked)?;
        Ok(Written::Modified)
    }

    /// `PUT …/imports/{importedPolicyId}`: 201 for a new import, 204
    /// otherwise.
    pub fn modify_import(
        &mut self,
        id: &PolicyId,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        let import = PolicyImport::from_json(id, body)?;
        imports::check_import(&self.policy_id, id, &import)?;
        let mut candidate = self.clone();
        let added =
            candidate.imports.get_or_insert_with(PolicyImports::default).set(id.clone(), import);
        if candidate.imports.as_ref().is_some_and(|imports| imports.len() > IMPORTS_MAX) {
            return Err(DittoError::policy_imports_too_large(id.as_str(), IMPORTS_MAX));
        }
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Unchecked)?;
        Ok(if added { Written::Created } else { Written::Modified })
    }

    /// `PUT …/imports/{importedPolicyId}/entries`: the labels the import
    /// asks for replaced (204; the import must exist).
    pub fn modify_import_entries(
        &mut self,
        id: &PolicyId,
        body: &Value,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<Written, DittoError> {
        let import = self.import(id)?.with_entries(body)?;
        let mut candidate = self.clone();
        candidate.imports.get_or_insert_with(PolicyImports::default).set(id.clone(), import);
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Unchecked)?;
        Ok(Written::Modified)
    }

    /// `DELETE …/imports` (204): no imports left, `{}` printed.
    pub fn delete_imports(
        &mut self,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<(), DittoError> {
        let mut candidate = self.clone();
        candidate.imports = Some(PolicyImports::default());
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Unchecked)
    }

    /// `DELETE …/imports/{importedPolicyId}` (204; the import must exist).
    /// The lock-out rule applies again once the last import is gone.
    pub fn delete_import(
        &mut self,
        id: &PolicyId,
        limits: &PolicyLimits,
        now: Timestamp,
    ) -> Result<(), DittoError> {
        self.import(id)?;
        let mut candidate = self.clone();
        if let Some(imports) = candidate.imports.as_mut() {
            imports.remove(id);
        }
        self.commit(candidate, Writes::Nothing, limits, now, Lockout::Unchecked)
    }
}

/// Which subjects a command writes, and so rounds and checks for expiry.
#[derive(Clone, Copy)]
enum Writes<'a> {
    Everything,
    Entry(&'a Label),
    Subject(&'a Label, &'a SubjectId),
    Nothing,
}

impl Writes<'_> {
    fn covers(self, label: &Label, id: &SubjectId) -> bool {
        match self {
            Writes::Everything => true,
            Writes::Entry(l) => l == label,
            Writes::Subject(l, s) => l == label && s == id,
            Writes::Nothing => false,
        }
    }
}

/// Whether a command is held to the lock-out rule, and the error of its
/// level when it breaks it. Ditto runs its `PoliciesValidator` for
/// changes of the policy, its entries, subjects and resources, not for
/// changes of its imports: a policy that imports others is not checked
/// anyway, and Ditto lets removing the last import leave one that fails.
#[derive(Clone, Copy)]
enum Lockout<'a> {
    Whole,
    Entry(&'a Label),
    Unchecked,
}

impl Lockout<'_> {
    fn applies(self) -> bool {
        !matches!(self, Lockout::Unchecked)
    }

    fn error(self, policy_id: &str, reason: String) -> DittoError {
        match self {
            Lockout::Entry(label) => DittoError::policy_entry_modification_invalid(
                policy_id,
                label.as_str(),
                Some(reason),
            ),
            Lockout::Whole | Lockout::Unchecked => {
                DittoError::policy_modification_invalid(policy_id, Some(reason))
            }
        }
    }
}

fn entries_from_json(value: &Value) -> Result<Vec<PolicyEntry>, DittoError> {
    let Some(object) = value.as_object() else {
        return Err(wrong_type(value, "/entries", "JsonObject"));
    };
    let mut entries: Vec<PolicyEntry> = Vec::with_capacity(object.len());
    for (label, entry) in object {
        let entry = PolicyEntry::from_json(Label::parse(label)?, entry)?;
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests;
