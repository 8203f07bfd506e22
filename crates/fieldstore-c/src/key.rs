//! `fdb_key_t`: the metadata one archived object is stored under.

use std::ffi::{c_char, c_int};

use fieldstore::model::{Atom, Key};

use crate::errors::run;
use crate::strings::{drop_obj, give, obj, text};

/// Pairs in the order added; adding a keyword again replaces its value, as in FDB5. Atoms:
/// a model builds a key per field, and short strings then need no allocation.
#[derive(Debug, Default)]
pub struct fdb_key_t {
    pairs: Vec<(Atom, Atom)>,
}

impl fdb_key_t {
    pub fn key(&self) -> Key {
        Key::from_pairs(self.pairs.iter().cloned())
    }

    fn set(&mut self, keyword: &str, value: &str) {
        match self.pairs.iter_mut().find(|(k, _)| k == keyword) {
            Some(p) => p.1 = Atom::from(value),
            None => self.pairs.push((Atom::from(keyword), Atom::from(value))),
        }
    }
}

#[no_mangle]
pub extern "C" fn fdb_new_key(key: *mut *mut fdb_key_t) -> c_int {
    run(|| give(key, "key", fdb_key_t::default()))
}

#[no_mangle]
pub extern "C" fn fdb_key_add(
    key: *mut fdb_key_t,
    param: *const c_char,
    value: *const c_char,
) -> c_int {
    run(|| {
        let key = obj(key, "key")?;
        let param = text(param, "param")?;
        let value = text(value, "value")?;
        key.set(param, value);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn fdb_delete_key(key: *mut fdb_key_t) -> c_int {
    run(|| {
        drop_obj(key);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_a_keyword_again_replaces_its_value() {
        let mut k = fdb_key_t::default();
        k.set("step", "0");
        k.set("param", "t");
        k.set("step", "6");
        assert_eq!(k.key().get("step"), Some("6"));
        assert_eq!(k.key().len(), 2);
    }
}
