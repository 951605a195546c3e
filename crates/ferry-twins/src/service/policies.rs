//! `/api/2/policies/{policyId}` and its sub-resources, as Ditto's policies
//! service enforces them (`PolicyCommandEnforcement`): a read needs READ
//! somewhere at or below the resource and returns what the caller may
//! read; a write needs WRITE on the resource with nothing below it
//! revoked; a new policy must give its creator WRITE on `policy:/`.
//! Creating or changing imports also needs READ on what they import
//! (`imports.rs`).

use super::{store_failure, Caller, Twins};
use crate::error::DittoError;
use crate::id::PolicyId;
use crate::pointer::JsonPointer;
use crate::policy::{
    requester, Label, Permission, Policy, PolicyImport, PolicyImports, ResourceKey, SubjectId,
    Timestamp, Written,
};
use crate::store::{Expect, PolicyRecord, StoreError, Write};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// A policy's addressable parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyResource {
    Policy,
    Entries,
    Entry(Label),
    Subjects(Label),
    Subject(Label, SubjectId),
    Resources(Label),
    Resource(Label, ResourceKey),
    Imports,
    Import(PolicyId),
    /// The labels an import lists (`…/imports/{id}/entries`).
    ImportEntries(PolicyId),
}

impl PolicyResource {
    /// The resource at `rest`, the URL path after `/policies/{policyId}`
    /// (empty for the policy itself). A subject id and a resource key take
    /// the rest of the path, slashes and all, as Ditto's routes do.
    pub fn parse(rest: &str) -> Option<Result<PolicyResource, DittoError>> {
        let rest = rest.trim_start_matches('/');
        if rest.is_empty() {
            return Some(Ok(PolicyResource::Policy));
        }
        if let Some(imports) = rest.strip_prefix("imports") {
            return PolicyResource::parse_import(imports);
        }
        let rest = rest.strip_prefix("entries")?;
        let rest = match rest {
            "" | "/" => return Some(Ok(PolicyResource::Entries)),
            _ => rest.strip_prefix('/')?,
        };
        let (label, rest) = rest.split_once('/').unwrap_or((rest, ""));
        let label = match Label::parse(label) {
            Ok(label) => label,
            Err(error) => return Some(Err(error)),
        };
        Some(match rest {
            "" => Ok(PolicyResource::Entry(label)),
            "subjects" | "subjects/" => Ok(PolicyResource::Subjects(label)),
            "resources" | "resources/" => Ok(PolicyResource::Resources(label)),
            _ => {
                if let Some(subject) = rest.strip_prefix("subjects/") {
                    SubjectId::parse(subject).map(|id| PolicyResource::Subject(label, id))
                } else if let Some(resource) = rest.strip_prefix("resources/") {
                    ResourceKey::from_url_path(resource)
                        .map(|key| PolicyResource::Resource(label, key))
                } else {
                    return None;
                }
            }
        })
    }

    /// This resource and `body` as `requester` writes them: Ditto's
    /// `{{ request:subjectId }}` in the subject ids they name replaced by
    /// the requester (`policy/requester.rs`).
    fn written_by<'a>(
        &'a self,
        body: &'a Value,
        requester: &str,
    ) -> Result<(Cow<'a, PolicyResource>, Cow<'a, Value>), DittoError> {
        let holds = match self {
            PolicyResource::Policy => requester::Holds::Policy,
            PolicyResource::Entries => requester::Holds::Entries,
            PolicyResource::Entry(_) => requester::Holds::Entry,
            PolicyResource::Subjects(_) => requester::Holds::Subjects,
            PolicyResource::Subject(label, id) => {
                let resource = match requester::in_subject_id(id.as_str(), requester) {
                    Cow::Borrowed(_) => Cow::Borrowed(self),
                    Cow::Owned(id) => {
                        Cow::Owned(PolicyResource::Subject(label.clone(), SubjectId::parse(&id)?))
                    }
                };
                return Ok((resource, Cow::Borrowed(body)));
            }
            _ => return Ok((Cow::Borrowed(self), Cow::Borrowed(body))),
        };
        Ok((Cow::Borrowed(self), requester::in_body(body, holds, requester)))
    }

    /// `rest` after `imports`: the imports, one import or its entries.
    fn parse_import(rest: &str) -> Option<Result<PolicyResource, DittoError>> {
        let rest = match rest {
            "" | "/" => return Some(Ok(PolicyResource::Imports)),
            _ => rest.strip_prefix('/')?,
        };
        let (id, rest) = rest.split_once('/').unwrap_or((rest, ""));
        let id = match PolicyId::parse(id) {
            Ok(id) => id,
            Err(error) => return Some(Err(error)),
        };
        match rest {
            "" => Some(Ok(PolicyResource::Import(id))),
            "entries" | "entries/" => Some(Ok(PolicyResource::ImportEntries(id))),
            _ => None,
        }
    }

    /// Where the resource lies in the policy's JSON: what `policy:/…`
    /// permissions are checked on.
    fn pointer(&self) -> JsonPointer {
        let entry = |label: &Label| JsonPointer::from_levels(["entries", label.as_str()]);
        match self {
            PolicyResource::Policy => JsonPointer::root(),
            PolicyResource::Entries => JsonPointer::from_levels(["entries"]),
            PolicyResource::Entry(label) => entry(label),
            PolicyResource::Subjects(label) => entry(label).child("subjects"),
            PolicyResource::Subject(label, id) => entry(label).child("subjects").child(id.as_str()),
            PolicyResource::Resources(label) => entry(label).child("resources"),
            PolicyResource::Resource(label, key) => {
                entry(label).child("resources").child(key.to_string())
            }
            PolicyResource::Imports => JsonPointer::from_levels(["imports"]),
            PolicyResource::Import(id) => JsonPointer::from_levels(["imports", id.as_str()]),
            PolicyResource::ImportEntries(id) => {
                JsonPointer::from_levels(["imports", id.as_str(), "entries"])
            }
        }
    }

    /// The resource's JSON in `policy`, or Ditto's not-found error.
    fn read(&self, policy: &Policy) -> Result<Value, DittoError> {
        Ok(match self {
            PolicyResource::Policy => policy.to_json(),
            PolicyResource::Entries => policy.entries_json(),
            PolicyResource::Entry(label) => policy.entry(label)?.to_json(),
            PolicyResource::Subjects(label) => policy.entry(label)?.subjects.to_json(),
            PolicyResource::Subject(label, id) => policy.subject(label, id)?.to_json(),
            PolicyResource::Resources(label) => policy.entry(label)?.resources.to_json(),
            PolicyResource::Resource(label, key) => policy.resource(label, key)?.to_json(),
            PolicyResource::Imports => policy.imports_json(),
            PolicyResource::Import(id) => policy.import(id)?.to_json(),
            PolicyResource::ImportEntries(id) => policy.import(id)?.entries_json(),
        })
    }

    /// The imports a PUT of `body` here would create or change, for the
    /// READ they need (`check_imports_readable`). A body that does not
    /// parse, or imports the policy itself, names none: the write refuses
    /// it with its own error.
    fn imports_written(&self, policy_id: &str, body: &Value) -> PolicyImports {
        let mut imports = PolicyImports::default();
        match self {
            PolicyResource::Policy => {
                if let Some(Ok(all)) = body.get("imports").map(PolicyImports::from_json) {
                    imports = all;
                }
            }
            PolicyResource::Imports => {
                if let Ok(all) = PolicyImports::from_json(body) {
                    imports = all;
                }
            }
            PolicyResource::Import(id) => {
                if let Ok(import) = PolicyImport::from_json(id, body) {
                    imports.set(id.clone(), import);
                }
            }
            PolicyResource::ImportEntries(id) => {
                if let Ok(import) = PolicyImport::default().with_entries(body) {
                    imports.set(id.clone(), import);
                }
            }
            _ => {}
        }
        if imports.check(policy_id).is_err() {
            return PolicyImports::default();
        }
        imports
    }

    /// The 404 for a caller who may read nothing here.
    fn not_accessible(&self, policy_id: &str) -> DittoError {
        match self {
            PolicyResource::Policy | PolicyResource::Entries => {
                DittoError::policy_not_found(policy_id)
            }
            PolicyResource::Entry(label)
            | PolicyResource::Subjects(label)
            | PolicyResource::Resources(label) => {
                DittoError::policy_entry_not_found(policy_id, label.as_str())
            }
            PolicyResource::Subject(label, id) => {
                DittoError::subject_not_found(policy_id, label.as_str(), id.as_str())
            }
            PolicyResource::Resource(label, key) => {
                DittoError::resource_not_found(policy_id, label.as_str(), &key.to_string())
            }
            PolicyResource::Imports => DittoError::policy_imports_not_found(policy_id),
            PolicyResource::Import(id) | PolicyResource::ImportEntries(id) => {
                DittoError::policy_import_not_found(policy_id, id.as_str())
            }
        }
    }

    /// The 403 for a caller who may not write here.
    fn not_modifiable(&self, policy_id: &str) -> DittoError {
        match self {
            PolicyResource::Policy | PolicyResource::Entries => {
                DittoError::policy_not_modifiable(policy_id)
            }
            PolicyResource::Entry(label) => {
                DittoError::policy_entry_not_modifiable(policy_id, label.as_str())
            }
            PolicyResource::Subjects(label) => {
                DittoError::subjects_not_modifiable(policy_id, label.as_str())
            }
            PolicyResource::Subject(label, id) => {
                DittoError::subject_not_modifiable(policy_id, label.as_str(), id.as_str())
            }
            PolicyResource::Resources(label) => {
                DittoError::resources_not_modifiable(policy_id, label.as_str())
            }
            PolicyResource::Resource(label, key) => {
                DittoError::resource_not_modifiable(policy_id, label.as_str(), &key.to_string())
            }
            // Ditto maps no error for `…/entries` (its registry then
            // throws, a 500): the import's is the one that fits.
            PolicyResource::Imports => DittoError::policy_imports_not_modifiable(policy_id),
            PolicyResource::Import(id) | PolicyResource::ImportEntries(id) => {
                DittoError::policy_import_not_modifiable(policy_id, id.as_str())
            }
        }
    }
}

/// What a read returns: the caller's view and the revision it is of.
pub struct Retrieved {
    pub value: Value,
    pub revision: u64,
}

/// How many times a write is tried again when another node changed the
/// same policy between its read and its write.
const CONFLICT_RETRIES: usize = 3;

impl Twins {
    pub async fn retrieve_policy(
        &self,
        caller: &Caller,
        policy_id: &str,
        resource: &PolicyResource,
    ) -> Result<Retrieved, DittoError> {
        let cached =
            self.policy(policy_id).await?.ok_or_else(|| DittoError::policy_not_found(policy_id))?;
        let who = cached.enforcer.caller(&caller.subjects, Timestamp::now());
        let pointer = resource.pointer();
        if !who.has_permission_on_any_level_below("policy", &pointer, Permission::Read) {
            return Err(resource.not_accessible(policy_id));
        }
        let value = resource.read(&cached.policy.parse()?)?;
        let value = who
            .view("policy", &pointer, &value)
            .ok_or_else(|| resource.not_accessible(policy_id))?;
        Ok(Retrieved { value, revision: cached.policy.housekeeping.revision })
    }

    /// PUT on a policy resource: 201 with what was created, or 204.
    pub async fn modify_policy(
        &self,
        caller: &Caller,
        policy_id: &str,
        resource: &PolicyResource,
        body: &Value,
    ) -> Result<(Written, Value), DittoError> {
        let (resource, body) = match caller.subjects.first() {
            Some(requester) => resource.written_by(body, requester)?,
            None => (Cow::Borrowed(resource), Cow::Borrowed(body)),
        };
        let (resource, body) = (&*resource, &*body);
        // Before the permission on the importing policy, as Ditto's
        // pre-enforcer runs before its enforcement.
        let imports = resource.imports_written(policy_id, body);
        self.check_imports_readable(caller, imports.iter()).await?;
        self.write_policy(Some(caller), policy_id, resource, |current, now, limits| match current {
            None => match resource {
                PolicyResource::Policy => {
                    let created = Policy::create(policy_id, body, limits, now)?;
                    Ok((Written::Created, created))
                }
                _ => Err(DittoError::policy_not_found(policy_id)),
            },
            Some(current) => {
                let mut policy = current.clone();
                let written = match resource {
                    PolicyResource::Policy => policy.modify(body, limits, now)?,
                    PolicyResource::Entries => policy.modify_entries(body, limits, now)?,
                    PolicyResource::Entry(label) => {
                        policy.modify_entry(label, body, limits, now)?
                    }
                    PolicyResource::Subjects(label) => {
                        policy.modify_subjects(label, body, limits, now)?
                    }
                    PolicyResource::Subject(label, id) => {
                        policy.modify_subject(label, id, body, limits, now)?
                    }
                    PolicyResource::Resources(label) => {
                        policy.modify_resources(label, body, limits, now)?
                    }
                    PolicyResource::Resource(label, key) => {
                        policy.modify_resource(label, key, body, limits, now)?
                    }
                    PolicyResource::Imports => policy.modify_imports(body, limits, now)?,
                    PolicyResource::Import(id) => policy.modify_import(id, body, limits, now)?,
                    PolicyResource::ImportEntries(id) => {
                        policy.modify_import_entries(id, body, limits, now)?
                    }
                };
                Ok((written, policy))
            }
        })
        .await
    }

    /// DELETE on a policy resource (204).
    pub async fn delete_policy(
        &self,
        caller: &Caller,
        policy_id: &str,
        resource: &PolicyResource,
    ) -> Result<(), DittoError> {
        if *resource == PolicyResource::Policy {
            return self.delete_whole_policy(caller, policy_id).await;
        }
        self.write_policy(Some(caller), policy_id, resource, |current, now, limits| {
            let Some(current) = current else {
                return Err(DittoError::policy_not_found(policy_id));
            };
            let mut policy = current.clone();
            match resource {
                PolicyResource::Entry(label) => policy.delete_entry(label, limits, now)?,
                PolicyResource::Subject(label, id) => {
                    policy.delete_subject(label, id, limits, now)?
                }
                PolicyResource::Resource(label, key) => {
                    policy.delete_resource(label, key, limits, now)?
                }
                PolicyResource::Imports => policy.delete_imports(limits, now)?,
                PolicyResource::Import(id) => policy.delete_import(id, limits, now)?,
                // The collections and the policy itself are not deleted
                // here; the HTTP layer routes no such DELETE.
                _ => return Err(resource.not_modifiable(policy_id)),
            }
            Ok((Written::Modified, policy))
        })
        .await
        .map(|_| ())
    }

    async fn delete_whole_policy(
        &self,
        caller: &Caller,
        policy_id: &str,
    ) -> Result<(), DittoError> {
        let _lock = self.write_lock("policy", policy_id).await;
        for _ in 0..CONFLICT_RETRIES {
            let cached = self
                .policy(policy_id)
                .await?
                .ok_or_else(|| DittoError::policy_not_found(policy_id))?;
            let who = cached.enforcer.caller(&caller.subjects, Timestamp::now());
            if !who.has_permission("policy", &JsonPointer::root(), Permission::Write) {
                return Err(DittoError::policy_not_modifiable(policy_id));
            }
            let expect = Expect::Revision(cached.policy.housekeeping.revision);
            let write = Write::DeletePolicy { id: policy_id.to_owned(), expect };
            match self.store.commit(vec![write]).await {
                Ok(()) => {
                    self.policies.remove(policy_id);
                    self.policy_changed(policy_id, None);
                    return Ok(());
                }
                Err(StoreError::Conflict { .. }) => {
                    self.policies.remove(policy_id);
                }
                Err(error) => {
                    return Err(store_failure(error, DittoError::policy_unavailable(policy_id)))
                }
            }
        }
        Err(DittoError::policy_unavailable(policy_id))
    }

    /// Removes the subjects of `policy_id` whose expiry has passed, as
    /// Ditto's `DeleteExpiredSubject` does: Ferry's own write, on no
    /// caller's behalf. The write tells the announcements' agenda of the
    /// policy as it now is; a policy that is gone is forgotten there.
    pub(crate) async fn remove_expired_subjects(&self, policy_id: &str) -> Result<(), DittoError> {
        let written = self
            .write_policy(None, policy_id, &PolicyResource::Policy, |current, now, _| {
                let current = current.ok_or_else(|| DittoError::policy_not_found(policy_id))?;
                let mut policy = current.clone();
                policy.remove_expired_subjects(now);
                Ok((Written::Modified, policy))
            })
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(error) if error.status == 404 => {
                self.policy_changed(policy_id, None);
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// The read-modify-write of every policy change: `change` makes the
    /// new policy from the current one (`None` if there is none), the
    /// caller's permission is checked on the current one (or, for a
    /// creation, on the new one), and the result is stored expecting the
    /// revision it was made from. Without a caller it is Ferry's own
    /// housekeeping, checked against nobody.
    async fn write_policy(
        &self,
        caller: Option<&Caller>,
        policy_id: &str,
        resource: &PolicyResource,
        change: impl Fn(
            Option<&Policy>,
            Timestamp,
            &crate::policy::PolicyLimits,
        ) -> Result<(Written, Policy), DittoError>,
    ) -> Result<(Written, Value), DittoError> {
        let _lock = self.write_lock("policy", policy_id).await;
        let limits = self.config.policy_limits;
        for _ in 0..CONFLICT_RETRIES {
            let now = Timestamp::now();
            let current = self.policy(policy_id).await?;
            let pointer = resource.pointer();
            if let (Some(current), Some(caller)) = (&current, caller) {
                let who = current.enforcer.caller(&caller.subjects, now);
                if !who.has_permission("policy", &pointer, Permission::Write) {
                    return Err(resource.not_modifiable(policy_id));
                }
            }
            let parsed = current.as_ref().map(|c| c.policy.parse()).transpose()?;
            let (written, mut policy) = change(parsed.as_ref(), now, &limits)?;
            let previous = current.as_ref().map(|c| c.policy.housekeeping);
            policy.housekeeping.revision = previous.map_or(1, |p| p.revision + 1);
            policy.housekeeping.created = previous.and_then(|p| p.created).or(Some(now));
            policy.housekeeping.modified = Some(now);
            // Resolved before the commit: a creation is authorised with
            // what its imports bring in, as Ditto loads the enforcer of a
            // `CreatePolicy` with its imports resolved.
            let resolved = self.resolve(&policy).await?;
            let expect = match &current {
                None => {
                    let subjects = caller.map_or(&[][..], |caller| &caller.subjects);
                    let who = resolved.enforcer.caller(subjects, now);
                    if !who.has_permission("policy", &JsonPointer::root(), Permission::Write) {
                        return Err(DittoError::policy_not_creatable(policy_id));
                    }
                    Expect::Absent
                }
                Some(current) => Expect::Revision(current.policy.housekeeping.revision),
            };
            let record = PolicyRecord {
                id: policy_id.to_owned(),
                revision: policy.housekeeping.revision,
                created: policy.housekeeping.created.unwrap_or(now).to_string(),
                modified: now.to_string(),
                doc: Arc::new(policy.to_json()),
            };
            match self.store.commit(vec![Write::Policy { record, expect }]).await {
                Ok(()) => {
                    let value = resource.read(&policy).unwrap_or(Value::Null);
                    self.policies.insert(policy_id.to_owned(), Some(resolved));
                    self.policy_changed(policy_id, Some(&policy));
                    return Ok((written, value));
                }
                Err(StoreError::Conflict { .. }) => {
                    // Another node wrote it: read it again and redo.
                    self.policies.remove(policy_id);
                }
                Err(error) => {
                    return Err(store_failure(error, DittoError::policy_unavailable(policy_id)))
                }
            }
        }
        Err(DittoError::policy_unavailable(policy_id))
    }
}
