//! Functions: libraries of Lua functions that FUNCTION LOAD stores and FCALL calls by name.
//!
//! A library is stored as its code alone (see `keyspace::libraries`), as Redis saves it in
//! RDB files; what it registers is learnt by running the code. [`Libraries`] is what the
//! stored libraries registered at one generation of the records; each Lua state loads them
//! again when that generation changes (see [`super::Vm`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::flags::ScriptFlags;
use super::{Registered, Scripts};
use crate::error::Error;
use crate::keyspace::{Keyspace, LibraryEdit};

/// How long FUNCTION LOAD lets a library's code run, as Redis's `LOAD_TIMEOUT_MS`.
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: ScriptFlags,
}

pub struct Library {
    pub name: String,
    /// As loaded, first line included.
    pub code: Bytes,
    /// The code after the first line (which starts with its newline, so line numbers count
    /// from the first line).
    pub body: Bytes,
    /// In name order.
    pub functions: Vec<FunctionInfo>,
}

/// The libraries stored at one generation of the records, and their functions.
#[derive(Default)]
pub struct Libraries {
    pub generation: u64,
    libraries: BTreeMap<String, Library>,
    /// Function name → its library's name.
    functions: HashMap<String, String>,
}

impl Libraries {
    /// In name order.
    pub fn iter(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    pub fn library(&self, name: &[u8]) -> Option<&Library> {
        self.libraries.get(std::str::from_utf8(name).ok()?)
    }

    pub fn function(&self, name: &[u8]) -> Option<&FunctionInfo> {
        let name = std::str::from_utf8(name).ok()?;
        let library = self.libraries.get(self.functions.get(name)?)?;
        library.functions.iter().find(|f| f.name == name)
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    pub fn library_count(&self) -> usize {
        self.libraries.len()
    }

    /// The library that registers function `name`, other than `except`.
    fn owner_of(&self, name: &str, except: &str) -> Option<&str> {
        self.functions
            .get(name)
            .map(String::as_str)
            .filter(|owner| *owner != except)
    }

    fn insert(&mut self, library: Library) {
        for f in &library.functions {
            self.functions.insert(f.name.clone(), library.name.clone());
        }
        self.libraries.insert(library.name.clone(), library);
    }
}

/// A library's first line, `#!<engine> name=<name>`, as Redis's
/// `functionExtractLibMetaData` reads it: the library's name, and where its body starts.
pub fn library_metadata(code: &[u8]) -> Result<(String, usize), Error> {
    if !code.starts_with(b"#!") {
        return Err(Error::msg("Missing library metadata"));
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err(Error::msg("Invalid library metadata"));
    };
    let parts = match shale_protocol::split_args(&code[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err(Error::msg("Invalid library metadata")),
    };
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(Error::msg(
                    "Invalid metadata value, name argument was given multiple times",
                ));
            }
            name = Some(&part[5..]);
            continue;
        }
        return Err(Error::msg(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        )));
    }
    let Some(name) = name else {
        return Err(Error::msg("Library name was not given"));
    };
    if !valid_name(name) {
        return Err(Error::msg("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    let engine = &parts[0][2..];
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(Error::msg(format!(
            "Engine '{}' not found",
            String::from_utf8_lossy(engine)
        )));
    }
    // Checked by `valid_name`: letters, digits and underscores only.
    Ok((String::from_utf8_lossy(name).into_owned(), end))
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// What FUNCTION RESTORE does with the libraries already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Adds the payload's libraries; a name already taken fails the whole restore.
    Append,
    /// Adds them, replacing libraries of the same name.
    Replace,
    /// Deletes every library first.
    Flush,
}

impl Scripts {
    /// Whether [`Scripts::libraries`] can answer without running the libraries' code.
    pub fn libraries_are_current(&self, keyspace: &Keyspace) -> bool {
        let generation = keyspace.libraries_generation();
        self.libraries
            .read()
            .as_ref()
            .is_some_and(|current| current.generation == generation)
    }

    /// The stored libraries, as of the last change to them: read again (each library's code
    /// run in a Lua state) when the keyspace says they changed.
    pub fn libraries(&self, keyspace: &Keyspace) -> Result<Arc<Libraries>, Error> {
        loop {
            let generation = keyspace.libraries_generation();
            if let Some(current) = self.libraries.read().as_ref() {
                if current.generation == generation {
                    return Ok(current.clone());
                }
            }
            let built = Arc::new(self.read_libraries(keyspace, generation)?);
            // A change while they were read: read them again.
            if keyspace.libraries_generation() != generation {
                continue;
            }
            let mut cached = self.libraries.write();
            if cached.as_ref().is_none_or(|c| c.generation < generation) {
                *cached = Some(built.clone());
            }
            return Ok(built);
        }
    }

    fn read_libraries(&self, keyspace: &Keyspace, generation: u64) -> Result<Libraries, Error> {
        let mut built = Libraries {
            generation,
            ..Libraries::default()
        };
        let mut vm = self.checkout().map_err(vm_error)?;
        for stored in keyspace.libraries()? {
            match self.compile(&mut vm, Bytes::from(stored.code), None) {
                Ok(library) => built.insert(library),
                // Stored by FUNCTION LOAD, which loaded it: only a damaged record fails.
                Err(err) => tracing::warn!(
                    "function library {:?} does not load and is left out: {err}",
                    String::from_utf8_lossy(&stored.name)
                ),
            }
        }
        self.checkin(vm);
        Ok(built)
    }

    /// FUNCTION LOAD: checks and stores a library; returns its name.
    pub fn load_library(
        &self,
        keyspace: &Keyspace,
        code: Bytes,
        replace: bool,
        timeout: bool,
    ) -> Result<String, Error> {
        let _changing = self.changing.lock();
        let current = self.libraries(keyspace)?;
        let (name, _) = library_metadata(&code)?;
        if !replace && current.library(name.as_bytes()).is_some() {
            return Err(Error::msg(format!("Library '{name}' already exists")));
        }
        let mut vm = self.checkout().map_err(vm_error)?;
        let library = self.compile(&mut vm, code, timeout.then_some(LOAD_TIMEOUT));
        self.checkin(vm);
        let library = library?;
        if let Some(f) = library
            .functions
            .iter()
            .find(|f| current.owner_of(&f.name, &name).is_some())
        {
            return Err(Error::msg(format!("Function {} already exists", f.name)));
        }
        keyspace.write_libraries(LibraryEdit {
            put: vec![(name.clone().into_bytes(), library.code.to_vec())],
            ..LibraryEdit::default()
        })?;
        Ok(name)
    }

    /// FUNCTION DELETE.
    pub fn delete_library(&self, keyspace: &Keyspace, name: &[u8]) -> Result<(), Error> {
        let _changing = self.changing.lock();
        if self.libraries(keyspace)?.library(name).is_none() {
            return Err(Error::msg("Library not found"));
        }
        keyspace.write_libraries(LibraryEdit {
            delete: vec![name.to_vec()],
            ..LibraryEdit::default()
        })
    }

    /// FUNCTION FLUSH.
    pub fn flush_libraries(&self, keyspace: &Keyspace) -> Result<(), Error> {
        let _changing = self.changing.lock();
        keyspace.write_libraries(LibraryEdit {
            clear: true,
            ..LibraryEdit::default()
        })
    }

    /// FUNCTION RESTORE and the import of an RDB file: stores the libraries whose code is in
    /// `codes`, all or none, with Redis's checks in Redis's order. Each library's code may
    /// run [`LOAD_TIMEOUT`] if `timeout`, as FUNCTION LOAD's.
    pub fn restore_libraries(
        &self,
        keyspace: &Keyspace,
        codes: Vec<Bytes>,
        policy: RestorePolicy,
        timeout: bool,
    ) -> Result<(), Error> {
        let _changing = self.changing.lock();
        let current = self.libraries(keyspace)?;
        let mut vm = self.checkout().map_err(vm_error)?;
        let restored = self.compile_all(&mut vm, codes, timeout.then_some(LOAD_TIMEOUT));
        self.checkin(vm);
        let restored = restored?;
        if policy != RestorePolicy::Flush {
            if policy == RestorePolicy::Append {
                if let Some(library) = restored
                    .iter()
                    .find(|l| current.library(l.name.as_bytes()).is_some())
                {
                    return Err(Error::msg(format!(
                        "Library {} already exists",
                        library.name
                    )));
                }
            }
            // With REPLACE, the functions of a replaced library go with it.
            let collision = restored.functions.keys().find(|f| {
                current.functions.get(*f).is_some_and(|owner| {
                    policy == RestorePolicy::Append || restored.library(owner.as_bytes()).is_none()
                })
            });
            if let Some(f) = collision {
                return Err(Error::msg(format!("Function {f} already exists")));
            }
        }
        keyspace.write_libraries(LibraryEdit {
            clear: policy == RestorePolicy::Flush,
            put: restored
                .iter()
                .map(|l| (l.name.clone().into_bytes(), l.code.to_vec()))
                .collect(),
            ..LibraryEdit::default()
        })
    }

    /// Runs the code of each library in `vm`; none may have the name or a function of another.
    fn compile_all(
        &self,
        vm: &mut super::Vm,
        codes: Vec<Bytes>,
        timeout: Option<Duration>,
    ) -> Result<Libraries, Error> {
        let mut compiled = Libraries::default();
        for code in codes {
            let library = self.compile(vm, code, timeout)?;
            if compiled.library(library.name.as_bytes()).is_some() {
                return Err(Error::msg(format!(
                    "Library '{}' already exists",
                    library.name
                )));
            }
            if let Some(f) = library
                .functions
                .iter()
                .find(|f| compiled.functions.contains_key(&f.name))
            {
                return Err(Error::msg(format!("Function {} already exists", f.name)));
            }
            compiled.insert(library);
        }
        Ok(compiled)
    }

    /// Runs a library's code in `vm` and reads what it registers.
    fn compile(
        &self,
        vm: &mut super::Vm,
        code: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Library, Error> {
        let (name, body_start) = library_metadata(&code)?;
        let body = code.slice(body_start..);
        let registered = vm.load_library(&body, timeout).map_err(Error::msg)?;
        if registered.is_empty() {
            return Err(Error::msg("No functions registered"));
        }
        Ok(Library {
            name,
            code,
            body,
            functions: registered.into_iter().map(Registered::into_info).collect(),
        })
    }
}

fn vm_error(err: mlua::Error) -> Error {
    Error::msg(format!("can't start a Lua state: {err}"))
}
