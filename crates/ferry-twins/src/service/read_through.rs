//! Filling a cache from the store without ever putting an older value over
//! a newer one.
//!
//! Reads take no lock (`service.rs`), so a read that misses can load an
//! entity from the store while a write of it commits and caches the new
//! revision. Cached after that, the loaded value would be the older one,
//! and every later read would see the entity as it was before the write
//! until it is evicted. So a miss first takes the key's placeholder
//! (quick_cache's guard: one loader per key, other readers of the key wait
//! for its value) and caches through it. A write's `insert` or `remove`
//! of the key takes the placeholder away, and the load's insert then fails,
//! leaving the write's.

use quick_cache::sync::Cache;
use std::future::Future;

/// `key` from `cache` (`on_hit` makes the answer of a cached value), or
/// from `load` on a miss, which answers both what to return and what to
/// cache (`None`: nothing, e.g. an absence not worth remembering).
pub(super) async fn read_through<V, R, E>(
    cache: &Cache<String, V>,
    key: &str,
    on_hit: impl FnOnce(V) -> Result<R, E>,
    load: impl Future<Output = Result<(R, Option<V>), E>>,
) -> Result<R, E>
where
    V: Clone,
{
    if let Some(cached) = cache.get(key) {
        return on_hit(cached);
    }
    let guard = match cache.get_value_or_guard_async(key).await {
        Ok(cached) => return on_hit(cached),
        Err(guard) => guard,
    };
    let (answer, to_cache) = load.await?;
    if let Some(value) = to_cache {
        // Err: a write of the key came meanwhile, and its value stays.
        let _ = guard.insert(value);
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// Reads "k" through `cache` with a load that answers 1 (the older
    /// value) only after `meanwhile` ran, as a write would while the
    /// store is being read.
    async fn read_overtaken_by(cache: &Cache<String, u32>, meanwhile: impl FnOnce()) -> u32 {
        let (loading, load_started) = oneshot::channel();
        let (release, released) = oneshot::channel::<()>();
        let load = async {
            loading.send(()).unwrap();
            released.await.unwrap();
            Ok::<_, ()>((1, Some(1)))
        };
        let read = read_through(cache, "k", Ok, load);
        let write = async {
            load_started.await.unwrap();
            meanwhile();
            release.send(()).unwrap();
        };
        tokio::join!(read, write).0.unwrap()
    }

    #[tokio::test]
    async fn a_load_overtaken_by_a_write_leaves_the_written_value_cached() {
        let cache = Cache::new(8);
        assert_eq!(read_overtaken_by(&cache, || cache.insert("k".to_owned(), 2)).await, 1);
        assert_eq!(cache.get("k"), Some(2), "the write's value stays");
    }

    #[tokio::test]
    async fn a_load_overtaken_by_a_removal_caches_nothing() {
        let cache = Cache::new(8);
        assert_eq!(
            read_overtaken_by(&cache, || {
                cache.remove("k");
            })
            .await,
            1
        );
        assert_eq!(cache.get("k"), None, "the removed entity is not cached again");
    }

    #[tokio::test]
    async fn a_load_alone_is_cached_and_later_reads_hit() {
        let cache = Cache::new(8);
        assert_eq!(read_overtaken_by(&cache, || ()).await, 1);
        assert_eq!(cache.get("k"), Some(1));
        let hit = read_through(&cache, "k", |cached| Ok::<_, ()>(cached + 10), async {
            unreachable!("a hit does not load")
        });
        assert_eq!(hit.await, Ok(11));
    }
}
