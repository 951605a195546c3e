//! SQLite's own page cache, without the whole-cache scan it made at the end
//! of most write transactions.
//!
//! **Why.** When a write transaction ends, SQLite's pager asks the page
//! cache to drop every page beyond the database's end (`xTruncate`). The
//! default cache (`pcache1`) does that cheaply only when the largest page
//! number it has ever held is near the end; otherwise it walks every slot
//! of its hash table and every page in it. A B-tree split that puts its
//! new pages in order (`balance_nonroot`) parks one of them for a moment
//! under the number of the lock-byte page, which lies 1 GiB into the file
//! (page 262,145 at 4 KiB). So for any database under 1 GiB, every commit
//! that split an index page walked the writer's whole 64 MiB cache, to
//! drop nothing: 9.6% of the server's CPU in a run of modifies (see
//! docs/benchmarks.md, "The page cache's scan").
//!
//! **What.** The cache here is `pcache1`, unchanged, behind a thin layer
//! that keeps, for each cache, the page numbers above the database's last
//! known end that may be in it ([`Beyond`]). A truncate that none of them
//! reaches would drop nothing and is not passed on; every other one is.
//!
//! **Installed** once per process, before SQLite initialises (it reads its
//! page cache methods then), by [`open`], through which the store opens
//! every connection. If something else initialised SQLite first, the
//! default cache stays, and only the scan comes back.

use rusqlite::{ffi, Connection, OpenFlags};
use std::collections::BTreeSet;
use std::ffi::{c_int, c_uint};
use std::path::Path;
#[cfg(test)]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Opens a connection to `path`, with this page cache when it could be
/// installed.
pub(in crate::store) fn open(path: &Path, flags: OpenFlags) -> rusqlite::Result<Connection> {
    install();
    Connection::open_with_flags(path, flags)
}

/// Truncates not passed on to `pcache1`, since the process started: for
/// tests, which cannot see the scan itself; counted in test builds only.
#[cfg(test)]
static SKIPPED: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
pub(super) fn skipped() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

/// Whether SQLite uses this page cache.
pub(super) fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let installed = install_once();
        if !installed {
            tracing::debug!(
                "SQLite was initialised before the twin store opened: its default page cache stays"
            );
        }
        installed
    })
}

/// The page numbers above the database's last known end that may be in
/// one cache. Invariant: every cached page numbered above `watermark` is
/// in `keys` (which may hold more: pages the cache evicted, or discarded,
/// unseen).
#[derive(Debug)]
struct Beyond {
    /// The database's last page at the last truncate; `UNKNOWN` before the
    /// first and after the cache was cleared, when no page is tracked and
    /// the next truncate is always passed on.
    watermark: AtomicU32,
    keys: Mutex<BTreeSet<u32>>,
}

const UNKNOWN: u32 = u32::MAX;

/// The largest limit of a truncate that clears the cache
/// (`sqlite3PcacheClear`).
const CLEARED: u32 = 2;

impl Beyond {
    fn new() -> Beyond {
        Beyond { watermark: AtomicU32::new(UNKNOWN), keys: Mutex::new(BTreeSet::new()) }
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A page numbered `key` may have been created. Called on every fetch:
    /// the common case, a page within the database, is one load.
    fn created(&self, key: u32) {
        if key > self.watermark.load(Ordering::Relaxed) {
            self.keys().insert(key);
        }
    }

    /// The page numbered `old` is now numbered `new`.
    fn renamed(&self, old: u32, new: u32) {
        let mut keys = self.keys();
        keys.remove(&old);
        if new > self.watermark.load(Ordering::Relaxed) {
            keys.insert(new);
        }
    }

    /// Whether a truncate at `limit` (dropping pages numbered `limit` and
    /// up) can drop anything; once it is done (or skipped), no page
    /// numbered `limit` or more is cached, and the ones below are within
    /// the database, so the bookkeeping starts again from `limit - 1`.
    ///
    /// Except after the pager clears its cache (a limit of 1, or 2 when it
    /// keeps page 1): then tracking from there would put every page read
    /// afterwards in `keys`, so nothing is tracked until the next truncate,
    /// which is passed on. Readers' caches, which are cleared and never
    /// truncated otherwise, stay that way.
    fn truncate(&self, limit: u32) -> bool {
        let mut keys = self.keys();
        let watermark = self.watermark.load(Ordering::Relaxed);
        let needed =
            watermark == UNKNOWN || limit <= watermark || keys.range(limit..).next().is_some();
        keys.clear();
        let watermark = if limit <= CLEARED { UNKNOWN } else { limit - 1 };
        self.watermark.store(watermark, Ordering::Relaxed);
        needed
    }
}

/// `pcache1`'s methods, as SQLite's default configuration holds them.
struct Pcache1 {
    create: unsafe extern "C" fn(c_int, c_int, c_int) -> *mut ffi::sqlite3_pcache,
    cachesize: unsafe extern "C" fn(*mut ffi::sqlite3_pcache, c_int),
    pagecount: unsafe extern "C" fn(*mut ffi::sqlite3_pcache) -> c_int,
    fetch: unsafe extern "C" fn(
        *mut ffi::sqlite3_pcache,
        c_uint,
        c_int,
    ) -> *mut ffi::sqlite3_pcache_page,
    unpin: unsafe extern "C" fn(*mut ffi::sqlite3_pcache, *mut ffi::sqlite3_pcache_page, c_int),
    rekey: unsafe extern "C" fn(
        *mut ffi::sqlite3_pcache,
        *mut ffi::sqlite3_pcache_page,
        c_uint,
        c_uint,
    ),
    truncate: unsafe extern "C" fn(*mut ffi::sqlite3_pcache, c_uint),
    destroy: unsafe extern "C" fn(*mut ffi::sqlite3_pcache),
    shrink: Option<unsafe extern "C" fn(*mut ffi::sqlite3_pcache)>,
}

static PCACHE1: OnceLock<Pcache1> = OnceLock::new();

/// One cache: `pcache1`'s, and its pages beyond the end.
struct Cache {
    inner: *mut ffi::sqlite3_pcache,
    beyond: Beyond,
}

fn install_once() -> bool {
    // SAFETY: `sqlite3_config` with SQLITE_CONFIG_GETPCACHE2 writes the
    // configured methods into the struct its one variadic argument points
    // to, which is a live, writable `sqlite3_pcache_methods2`; it fails
    // without writing once SQLite is initialised. A zeroed struct is a
    // valid value of it (null pointers, `None` functions).
    let mut default: ffi::sqlite3_pcache_methods2 = unsafe { std::mem::zeroed() };
    let got = unsafe {
        ffi::sqlite3_config(
            ffi::SQLITE_CONFIG_GETPCACHE2,
            &mut default as *mut ffi::sqlite3_pcache_methods2,
        )
    };
    if got != ffi::SQLITE_OK {
        return false;
    }
    let methods = (|| {
        Some(Pcache1 {
            create: default.xCreate?,
            cachesize: default.xCachesize?,
            pagecount: default.xPagecount?,
            fetch: default.xFetch?,
            unpin: default.xUnpin?,
            rekey: default.xRekey?,
            truncate: default.xTruncate?,
            destroy: default.xDestroy?,
            shrink: default.xShrink,
        })
    })();
    let Some(methods) = methods else { return false };
    if PCACHE1.set(methods).is_err() {
        return false;
    }
    let ours = ffi::sqlite3_pcache_methods2 {
        iVersion: default.iVersion,
        pArg: default.pArg,
        xInit: default.xInit,
        xShutdown: default.xShutdown,
        xCreate: Some(create),
        xCachesize: Some(cachesize),
        xPagecount: Some(pagecount),
        xFetch: Some(fetch),
        xUnpin: Some(unpin),
        xRekey: Some(rekey),
        xTruncate: Some(truncate),
        xDestroy: Some(destroy),
        xShrink: default.xShrink.map(|_| shrink as unsafe extern "C" fn(_)),
    };
    // SAFETY: SQLITE_CONFIG_PCACHE2 copies the struct its argument points
    // to (`sqlite3GlobalConfig.pcache2 = *va_arg(...)`), so `ours` may go
    // when the call returns. Every method in it is one of this module's,
    // which keep the contract of `pcache1`'s (they call them), or
    // `pcache1`'s own, with `pcache1`'s `pArg`.
    unsafe {
        ffi::sqlite3_config(
            ffi::SQLITE_CONFIG_PCACHE2,
            &ours as *const ffi::sqlite3_pcache_methods2,
        ) == ffi::SQLITE_OK
    }
}

fn pcache1() -> &'static Pcache1 {
    // Set before SQLite was given the methods that call this.
    PCACHE1.get().expect("pcache1's methods are kept before ours are installed")
}

/// The cache behind a handle SQLite passes to a method.
///
/// # Safety
/// `handle` must be one `create` returned and `destroy` has not freed: SQLite
/// passes a cache's methods only the handle its `xCreate` returned, until it
/// calls `xDestroy` on it, after which it never uses the handle again.
unsafe fn cache<'a>(handle: *mut ffi::sqlite3_pcache) -> &'a Cache {
    // SAFETY: by this function's contract, `handle` is a live
    // `Box<Cache>` turned into a raw pointer by `create`. `Cache` is only
    // read through shared references: its bookkeeping is atomics and a
    // mutex, and `inner` is handed to `pcache1`, which does its own locking.
    unsafe { &*handle.cast::<Cache>() }
}

unsafe extern "C" fn create(
    page_size: c_int,
    extra: c_int,
    purgeable: c_int,
) -> *mut ffi::sqlite3_pcache {
    // SAFETY: `pcache1`'s own method, with SQLite's own arguments.
    let inner = unsafe { (pcache1().create)(page_size, extra, purgeable) };
    if inner.is_null() {
        return std::ptr::null_mut();
    }
    Box::into_raw(Box::new(Cache { inner, beyond: Beyond::new() })).cast()
}

unsafe extern "C" fn cachesize(handle: *mut ffi::sqlite3_pcache, pages: c_int) {
    // SAFETY (here and in the methods below): `handle` comes from SQLite,
    // see `cache`; `pcache1`'s methods get its own handle and SQLite's
    // other arguments unchanged.
    unsafe { (pcache1().cachesize)(cache(handle).inner, pages) }
}

unsafe extern "C" fn pagecount(handle: *mut ffi::sqlite3_pcache) -> c_int {
    unsafe { (pcache1().pagecount)(cache(handle).inner) }
}

unsafe extern "C" fn fetch(
    handle: *mut ffi::sqlite3_pcache,
    key: c_uint,
    create_flag: c_int,
) -> *mut ffi::sqlite3_pcache_page {
    let cache = unsafe { cache(handle) };
    if create_flag != 0 {
        cache.beyond.created(key);
    }
    unsafe { (pcache1().fetch)(cache.inner, key, create_flag) }
}

unsafe extern "C" fn unpin(
    handle: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    discard: c_int,
) {
    unsafe { (pcache1().unpin)(cache(handle).inner, page, discard) }
}

unsafe extern "C" fn rekey(
    handle: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    old: c_uint,
    new: c_uint,
) {
    let cache = unsafe { cache(handle) };
    cache.beyond.renamed(old, new);
    unsafe { (pcache1().rekey)(cache.inner, page, old, new) }
}

unsafe extern "C" fn truncate(handle: *mut ffi::sqlite3_pcache, limit: c_uint) {
    let cache = unsafe { cache(handle) };
    if cache.beyond.truncate(limit) {
        unsafe { (pcache1().truncate)(cache.inner, limit) }
    } else {
        #[cfg(test)]
        SKIPPED.fetch_add(1, Ordering::Relaxed);
    }
}

unsafe extern "C" fn destroy(handle: *mut ffi::sqlite3_pcache) {
    // SAFETY: SQLite's last call with this handle (see `cache`): the box
    // `create` made is taken back once and dropped after `pcache1`'s cache.
    let cache = unsafe { Box::from_raw(handle.cast::<Cache>()) };
    unsafe { (pcache1().destroy)(cache.inner) }
}

unsafe extern "C" fn shrink(handle: *mut ffi::sqlite3_pcache) {
    if let Some(shrink) = pcache1().shrink {
        unsafe { shrink(cache(handle).inner) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_the_first_truncate_everything_is_passed_on() {
        let beyond = Beyond::new();
        beyond.created(5);
        assert!(beyond.truncate(100));
    }

    #[test]
    fn a_page_parked_beyond_the_end_and_renamed_back_needs_no_truncate() {
        let beyond = Beyond::new();
        assert!(beyond.truncate(1001)); // the database ends at page 1000
        beyond.created(400);
        beyond.created(1001); // the database grows by a page
        beyond.renamed(400, 262_145); // balance_nonroot's temporary number
        beyond.renamed(1001, 400);
        beyond.renamed(262_145, 1001);
        assert!(!beyond.truncate(1002), "every page is within the 1,001 pages now");
    }

    #[test]
    fn pages_beyond_a_rolled_back_growth_are_dropped() {
        let beyond = Beyond::new();
        assert!(beyond.truncate(1001));
        beyond.created(1001);
        beyond.created(1002);
        assert!(beyond.truncate(1001), "the growth was rolled back");
        assert!(!beyond.truncate(1001), "and nothing beyond is cached now");
    }

    #[test]
    fn a_page_left_renamed_beyond_the_end_is_dropped() {
        let beyond = Beyond::new();
        assert!(beyond.truncate(11));
        beyond.renamed(3, 262_145);
        assert!(beyond.truncate(11));
    }

    #[test]
    fn a_shrinking_database_passes_truncates_on() {
        let beyond = Beyond::new();
        assert!(beyond.truncate(1001));
        assert!(beyond.truncate(900), "pages 900 to 1000 may be cached");
        assert!(!beyond.truncate(900));
        assert!(beyond.truncate(1));
        beyond.created(5);
        assert!(beyond.keys().is_empty(), "a cleared cache tracks nothing");
        assert!(beyond.truncate(900), "and passes the next truncate on");
        assert!(!beyond.truncate(900));
    }
}
