//! One shared copy of each distinct value a trace repeats (text, shapes).

use rustc_hash::FxHashSet as HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// The distinct values of `T` seen so far, each kept once as an `Arc<T>` every holder points at.
/// The last value given is checked first: consecutive ops mostly repeat it.
#[derive(Debug)]
pub struct Interner<T: ?Sized> {
    seen: HashSet<Arc<T>>,
    last: Option<Arc<T>>,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Self {
            seen: HashSet::default(),
            last: None,
        }
    }
}

impl<T> Interner<T>
where
    T: ?Sized + Hash + Eq,
    for<'a> Arc<T>: From<&'a T>,
{
    /// The shared copy of `value` (made on first sight).
    pub fn share(&mut self, value: &T) -> Arc<T> {
        if let Some(last) = &self.last {
            if **last == *value {
                return Arc::clone(last);
            }
        }
        let shared = match self.seen.get(value) {
            Some(shared) => Arc::clone(shared),
            None => {
                let shared = Arc::<T>::from(value);
                self.seen.insert(Arc::clone(&shared));
                shared
            }
        };
        self.last = Some(Arc::clone(&shared));
        shared
    }
}
