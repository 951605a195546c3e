//! Policies as the service hands them out: with the entries their
//! `imports` bring in compiled into the enforcer, as Ditto's
//! `PolicyEnforcer.withResolvedImports` merges them, and never with an
//! imported policy older than the one in force.
//!
//! **Why a cached enforcer is never stale.** Each cached policy records,
//! per import, which content of the imported policy its enforcer was
//! compiled from: a `Weak` to the `Arc<CompactPolicy>` in that policy's cache
//! entry, or that the policy did not exist. [`Twins::policy`] compares
//! those with the cache before handing the enforcer out and compiles again
//! on any difference. That suffices because a cached `CompactPolicy` is never
//! changed in place: every write of a policy through this service puts a
//! new `Arc` in its cache entry (or removes it, for a deletion) before the
//! write is answered, so "the `Arc` in the cache is the one compiled from"
//! means "the imported entries are the ones compiled from". A `Weak` keeps
//! its allocation, so no other policy can take the address compared
//! against. An entry evicted and read again from the store is a new `Arc`:
//! that costs one compile, never a stale answer. A policy found missing
//! while resolving is remembered as missing (`None` in the cache) and a
//! creation overwrites that.
//!
//! **Cost.** A policy without imports is handed out as before; one with
//! imports costs one cache look-up per import (at most
//! [`crate::policy::IMPORTS_MAX`]) on
//! every use, and a compile when an imported policy changed.
//!
//! Resolving reads only the imported policies' own entries, never their
//! imports (Ditto resolves one level), so it does not recurse: a policy
//! read from the store only as an import source is cached unresolved and
//! resolved the first time it is used itself.

use super::read_through::read_through;
use super::{store_failure, Caller, Twins};
use crate::error::DittoError;
use crate::id::PolicyId;
use crate::pointer::JsonPointer;
use crate::policy::{CompactPolicy, Enforcer, Permission, Policy, PolicyImport, Timestamp};
use crate::store::PolicyRecord;
use quick_cache::sync::EntryAction;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// A policy as the service holds it: the model, serialized
/// (`policy/compact.rs`), and its compiled enforcer.
pub struct CachedPolicy {
    pub policy: Arc<CompactPolicy>,
    pub enforcer: Arc<Enforcer>,
    sources: Sources,
}

/// What an enforcer was compiled from besides the policy's own entries.
enum Sources {
    /// The imported policies as they were, one per import.
    Resolved(Vec<Source>),
    /// Not resolved yet: the policy was read as an import source. Its
    /// enforcer is then empty (it denies everything) and never handed out.
    Pending,
}

struct Source {
    id: PolicyId,
    /// The imported policy's content; `None`: it did not exist.
    seen: Option<Weak<CompactPolicy>>,
}

impl Source {
    fn is(&self, now: Option<&Arc<CachedPolicy>>) -> bool {
        match (&self.seen, now) {
            (None, None) => true,
            (Some(seen), Some(now)) => std::ptr::eq(seen.as_ptr(), Arc::as_ptr(&now.policy)),
            _ => false,
        }
    }
}

pub(crate) fn policy_of(record: &PolicyRecord) -> Result<Policy, DittoError> {
    let mut policy = Policy::from_json(&record.id, &record.doc)?;
    policy.housekeeping.revision = record.revision;
    policy.housekeeping.created = Timestamp::parse(&record.created);
    policy.housekeeping.modified = Timestamp::parse(&record.modified);
    Ok(policy)
}

impl Twins {
    /// The policy `id` with its imports resolved, from the cache or the
    /// store.
    pub async fn policy(&self, id: &str) -> Result<Option<Arc<CachedPolicy>>, DittoError> {
        let Some(cached) = self.stored_policy(id, false).await? else {
            return Ok(None);
        };
        if self.is_current(&cached).await? {
            return Ok(Some(cached));
        }
        let resolved = self.resolve_as(&cached.policy.parse()?, cached.policy.clone()).await?;
        // Only in place of the entry resolved again: a write that landed
        // meanwhile put a newer policy there, which must stay.
        let _ = self.policies.entry(id, Some(Duration::ZERO), |_, current| {
            if current.as_ref().is_some_and(|current| Arc::ptr_eq(current, &cached)) {
                *current = Some(resolved.clone());
            }
            EntryAction::Retain(())
        });
        Ok(Some(resolved))
    }

    /// `policy` compiled with what its imports bring in now.
    pub(super) async fn resolve(&self, policy: &Policy) -> Result<Arc<CachedPolicy>, DittoError> {
        self.resolve_as(policy, Arc::new(CompactPolicy::of(policy))).await
    }

    /// [`Twins::resolve`] of the policy cached as `compact`, which stays
    /// the policy's identity for those importing it.
    async fn resolve_as(
        &self,
        policy: &Policy,
        compact: Arc<CompactPolicy>,
    ) -> Result<Arc<CachedPolicy>, DittoError> {
        let mut sources = Vec::new();
        let mut imported = Vec::new();
        for (id, import) in policy.imports() {
            let source = self.stored_policy(id.as_str(), true).await?;
            sources.push(Source {
                id: id.clone(),
                seen: source.as_ref().map(|source| Arc::downgrade(&source.policy)),
            });
            if let Some(source) = source {
                imported.push((import, source.policy.parse()?));
            }
        }
        let entries = policy
            .entries()
            .chain(imported.iter().flat_map(|(import, source)| import.entries_from(source)));
        let enforcer = self.enforcers.of(entries);
        Ok(Arc::new(CachedPolicy {
            policy: compact,
            enforcer,
            sources: Sources::Resolved(sources),
        }))
    }

    /// Whether `cached` was resolved against the imported policies in
    /// force now.
    async fn is_current(&self, cached: &CachedPolicy) -> Result<bool, DittoError> {
        let Sources::Resolved(sources) = &cached.sources else {
            return Ok(false);
        };
        for source in sources {
            if !source.is(self.stored_policy(source.id.as_str(), true).await?.as_ref()) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The policy `id` as cached, perhaps not resolved; read from the
    /// store on a miss (`read_through.rs`: never over a newer policy
    /// cached meanwhile). A missing policy is cached as missing when
    /// `remember_absence` (import sources, looked up on every use).
    async fn stored_policy(
        &self,
        id: &str,
        remember_absence: bool,
    ) -> Result<Option<Arc<CachedPolicy>>, DittoError> {
        let load = async {
            let read = self.store.policy(id).await;
            let record =
                read.map_err(|error| store_failure(error, DittoError::policy_unavailable(id)))?;
            let Some(record) = record else {
                return Ok((None, remember_absence.then_some(None)));
            };
            let parsed = policy_of(&record)?;
            let policy = Arc::new(CompactPolicy::of(&parsed));
            let cached = if parsed.imports().next().is_none() {
                let enforcer = self.enforcers.of(parsed.entries());
                Arc::new(CachedPolicy { policy, enforcer, sources: Sources::Resolved(Vec::new()) })
            } else {
                let sources = Sources::Pending;
                Arc::new(CachedPolicy { policy, enforcer: Arc::default(), sources })
            };
            Ok((Some(cached.clone()), Some(Some(cached))))
        };
        read_through(&self.policies, id, Ok, load).await
    }

    /// Ditto's `PolicyImportsPreEnforcer`: whoever creates or changes
    /// imports must be able to READ, in each imported policy, every entry
    /// the import brings in implicitly and every label it lists; a
    /// missing imported policy is its 404.
    pub(super) async fn check_imports_readable<'a>(
        &self,
        caller: &Caller,
        imports: impl IntoIterator<Item = (&'a PolicyId, &'a PolicyImport)>,
    ) -> Result<(), DittoError> {
        let now = Timestamp::now();
        for (id, import) in imports {
            let imported = self
                .policy(id.as_str())
                .await?
                .ok_or_else(|| DittoError::policy_not_found(id.as_str()))?;
            let who = imported.enforcer.caller(&caller.subjects, now);
            let imported_policy = imported.policy.parse()?;
            let readable = import.labels_to_read(&imported_policy).all(|label| {
                let entry = JsonPointer::from_levels(["entries", label.as_str()]);
                who.has_permission("policy", &entry, Permission::Read)
            });
            if !readable {
                return Err(DittoError::imported_policy_not_readable(id.as_str()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{PolicyResource, TwinsConfig};
    use crate::store::sqlite::SqliteStore;
    use crate::store::Store;
    use serde_json::{json, Value};

    fn twins(dir: &tempfile::TempDir) -> Twins {
        let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
        Twins::new(Store::Sqlite(store), TwinsConfig::default())
    }

    fn owner() -> Caller {
        Caller::new(vec!["nginx:owner".to_owned()])
    }

    /// A policy the owner may do everything with, plus `entries`.
    fn body(entries: Value, imports: Option<Value>) -> Value {
        let mut entries = entries;
        entries["OWNER"] = json!({
            "subjects": {"nginx:owner": {"type": "t"}},
            "resources": {"policy:/": {"grant": ["READ", "WRITE"], "revoke": []},
                          "thing:/": {"grant": ["READ", "WRITE"], "revoke": []}},
            "importable": "never",
        });
        let mut policy = json!({ "entries": entries });
        if let Some(imports) = imports {
            policy["imports"] = imports;
        }
        policy
    }

    fn reader(importable: &str) -> Value {
        json!({"READER": {
            "subjects": {"nginx:reader": {"type": "t"}},
            "resources": {"thing:/": {"grant": ["READ"], "revoke": []}},
            "importable": importable,
        }})
    }

    async fn put(twins: &Twins, id: &str, resource: &str, body: &Value) -> Result<(), DittoError> {
        let resource = PolicyResource::parse(resource).unwrap()?;
        twins.modify_policy(&owner(), id, &resource, body).await.map(|_| ())
    }

    async fn reader_may_read(twins: &Twins, id: &str) -> bool {
        let cached = twins.policy(id).await.unwrap().unwrap();
        let who = cached.enforcer.caller(&["nginx:reader"], Timestamp::now());
        who.has_permission("thing", &JsonPointer::root(), Permission::Read)
    }

    #[tokio::test]
    async fn an_importing_policy_follows_every_change_of_what_it_imports() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        put(&twins, "ns:a", "", &body(reader("implicit"), None)).await.unwrap();
        let imports = json!({"ns:a": {}});
        put(&twins, "ns:b", "", &body(json!({}), Some(imports))).await.unwrap();
        assert!(reader_may_read(&twins, "ns:b").await);

        put(&twins, "ns:a", "/entries/READER", &reader("never")["READER"]).await.unwrap();
        assert!(!reader_may_read(&twins, "ns:b").await, "never imported");
        put(&twins, "ns:a", "/entries/READER", &reader("explicit")["READER"]).await.unwrap();
        assert!(!reader_may_read(&twins, "ns:b").await, "explicit, not listed");
        put(&twins, "ns:b", "/imports/ns:a/entries", &json!(["READER"])).await.unwrap();
        assert!(reader_may_read(&twins, "ns:b").await, "explicit and listed");

        // Deleted and made again with other entries, while B is not
        // looked at: the new policy has B's old revision number, and it
        // must not pass for the old one.
        let whole = PolicyResource::Policy;
        twins.delete_policy(&owner(), "ns:a", &whole).await.unwrap();
        put(&twins, "ns:a", "", &body(reader("never"), None)).await.unwrap();
        assert!(!reader_may_read(&twins, "ns:b").await, "made again, never importable");
        twins.delete_policy(&owner(), "ns:a", &whole).await.unwrap();
        assert!(!reader_may_read(&twins, "ns:b").await, "imported policy gone");
        put(&twins, "ns:a", "", &body(reader("implicit"), None)).await.unwrap();
        assert!(reader_may_read(&twins, "ns:b").await, "made again, implicit");

        twins
            .delete_policy(
                &owner(),
                "ns:b",
                &PolicyResource::Import(PolicyId::parse("ns:a").unwrap()),
            )
            .await
            .unwrap();
        assert!(!reader_may_read(&twins, "ns:b").await, "import deleted");
    }

    #[tokio::test]
    async fn importing_needs_read_on_what_is_imported() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        let missing = put(&twins, "ns:b", "", &body(json!({}), Some(json!({"ns:a": {}})))).await;
        assert_eq!(missing.unwrap_err().error, "policies:policy.notfound");
        // The owner of B reads nothing of A: A's only entry is its own.
        let mut a = body(reader("implicit"), None);
        a["entries"]["OWNER"]["subjects"] = json!({"nginx:other": {"type": "t"}});
        let other = Caller::new(vec!["nginx:other".to_owned()]);
        twins.modify_policy(&other, "ns:a", &PolicyResource::Policy, &a).await.unwrap();
        let refused = put(&twins, "ns:b", "", &body(json!({}), Some(json!({"ns:a": {}})))).await;
        let refused = refused.unwrap_err();
        assert_eq!((refused.status, refused.error), (404, "policies:policy.notfound"));
        assert!(refused.description.unwrap().contains("all imported policy entries"));
        let itself = put(&twins, "ns:b", "", &body(json!({}), Some(json!({"ns:b": {}})))).await;
        assert_eq!(itself.unwrap_err().error, "policies:import.invalid");
    }
}
