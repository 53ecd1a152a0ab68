//! ACL users, as in Redis 7.0: who each connection is, what it may run, and the log of what
//! was refused.
//!
//! A connection holds its user's [`UserCell`]; a change to the user (ACL SETUSER) replaces the
//! cell's [`User`], so every connection logged in as that user sees it from its next command,
//! as in Redis. For a user allowed everything (the `default` user unless configured
//! otherwise) checking a command is one atomic load; for others, a read lock and the rules.
//!
//! - [`catalog`]: the commands and their categories, as the command table describes them.
//! - [`user`]: a user's rules, applied and described as Redis applies and describes them.
//! - [`log`]: ACL LOG.
//! - [`file`]: the `aclfile` and `user` lines of the configuration.

pub mod catalog;
pub mod file;
pub mod log;
mod sha256;
pub mod user;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use catalog::Catalog;
use user::{has_spaces, merge_selector_arguments, Denied, KeyAccess, Request, RuleError, User};

/// The user connections are logged in as until they authenticate.
pub const DEFAULT_USER: &str = "default";

/// A user as connections hold it: its current rules, replaced whole by each change.
pub struct UserCell {
    pub name: Bytes,
    user: RwLock<Arc<User>>,
    /// Whether the user is allowed everything, which every command asks first: one load.
    unrestricted: AtomicBool,
    /// Set when the user is deleted (ACL DELUSER, ACL LOAD): a connection that still holds
    /// it, its closing under way, may run nothing.
    deleted: AtomicBool,
}

impl UserCell {
    fn new(user: User) -> Arc<UserCell> {
        Arc::new(UserCell {
            name: user.name.clone(),
            unrestricted: AtomicBool::new(user.unrestricted()),
            deleted: AtomicBool::new(false),
            user: RwLock::new(Arc::new(user)),
        })
    }

    pub fn current(&self) -> RwLockReadGuard<'_, Arc<User>> {
        self.user.read()
    }

    pub fn is_unrestricted(&self) -> bool {
        self.unrestricted.load(Ordering::Acquire)
    }

    /// Whether the user may run the request; a deleted user, whose connections are being
    /// closed, may run nothing.
    pub fn check(&self, request: &Request<'_>) -> Result<(), Denied> {
        match self.deleted.load(Ordering::Acquire) {
            true => Err(Denied::Command),
            false => self.current().check(request),
        }
    }

    /// [`User::allows_with_every_key`], nothing for a deleted user.
    pub fn allows_with_every_key(&self, request: &Request<'_>, access: KeyAccess) -> bool {
        !self.deleted.load(Ordering::Acquire)
            && self.current().allows_with_every_key(request, access)
    }

    /// Installs new rules. A user losing permissions stops counting as unrestricted before
    /// its rules change, and one gaining them only after, so no command is let through
    /// unchecked meanwhile.
    fn replace(&self, user: User) {
        let unrestricted = user.unrestricted();
        if !unrestricted {
            self.unrestricted.store(false, Ordering::Release);
        }
        *self.user.write() = Arc::new(user);
        if unrestricted {
            self.unrestricted.store(true, Ordering::Release);
        }
    }

    fn delete(&self) {
        self.unrestricted.store(false, Ordering::Release);
        self.deleted.store(true, Ordering::Release);
    }
}

/// Why ACL SETUSER failed, in Redis's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUserError {
    UnmatchedParenthesis(Bytes),
    Rule(Bytes, RuleError),
}

impl std::fmt::Display for SetUserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetUserError::UnmatchedParenthesis(arg) => write!(
                f,
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(arg)
            ),
            SetUserError::Rule(arg, err) => write!(
                f,
                "Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(arg),
                err.message()
            ),
        }
    }
}

/// What a change to a user means for the connections logged in as it.
pub enum Changed {
    /// A new user, or one whose channel permissions only grew.
    Nothing,
    /// Channel permissions shrank: subscribers must be checked against the user now.
    Channels(Arc<UserCell>),
}

pub struct Acl {
    catalog: Catalog,
    users: RwLock<BTreeMap<Bytes, Arc<UserCell>>>,
    default: Arc<UserCell>,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    all_channels_default: AtomicBool,
    pub log: log::AclLog,
    /// The `requirepass` last applied to the default user (CONFIG SET changes it only when it
    /// changes).
    requirepass: Mutex<Option<Option<String>>>,
}

impl Acl {
    pub fn new(catalog: Catalog) -> Acl {
        let default = UserCell::new(default_user(&catalog));
        let users = BTreeMap::from([(default.name.clone(), default.clone())]);
        Acl {
            catalog,
            users: RwLock::new(users),
            default,
            all_channels_default: AtomicBool::new(false),
            log: log::AclLog::default(),
            requirepass: Mutex::new(None),
        }
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn default_user(&self) -> Arc<UserCell> {
        self.default.clone()
    }

    pub fn set_all_channels_default(&self, all: bool) {
        self.all_channels_default.store(all, Ordering::Relaxed);
    }

    fn all_channels_default(&self) -> bool {
        self.all_channels_default.load(Ordering::Relaxed)
    }

    /// Whether a new connection starts logged in: the default user needs no password.
    pub fn default_needs_no_password(&self) -> bool {
        let user = self.default.current();
        user.nopass && user.enabled
    }

    pub fn user(&self, name: &[u8]) -> Option<Arc<UserCell>> {
        self.users.read().get(name).cloned()
    }

    /// The user `name` if `password` logs it in. Holding the users' lock meanwhile, a login
    /// cannot end on a user that ACL DELUSER is removing.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<UserCell>> {
        let users = self.users.read();
        let cell = users.get(name)?;
        let accepted = cell.current().accepts(password);
        accepted.then(|| cell.clone())
    }

    /// `requirepass`: the default user's only password, or none (`nopass`), when it changed.
    pub fn apply_requirepass(&self, password: Option<&str>) {
        let mut applied = self.requirepass.lock();
        let wanted = password.map(str::to_string);
        if applied.as_ref() == Some(&wanted) {
            return;
        }
        // Serialized with ACL SETUSER, which changes the same user.
        let _users = self.users.write();
        let mut user = (**self.default.current()).clone();
        let rules: Vec<Vec<u8>> = match &wanted {
            Some(p) => vec![b"resetpass".to_vec(), [b">", p.as_bytes()].concat()],
            None => vec![b"resetpass".to_vec(), b"nopass".to_vec()],
        };
        for rule in rules {
            // Both rules always apply.
            let _ = user.apply(&self.catalog, &rule, self.all_channels_default());
        }
        self.default.replace(user);
        *applied = Some(wanted);
    }

    /// ACL SETUSER: applies every rule to a copy of the user (or a new one), and keeps it
    /// only if all apply.
    pub fn set_user(&self, name: &[u8], rules: &[Bytes]) -> Result<Changed, SetUserError> {
        let rules = merge_selector_arguments(rules)
            .map_err(|at| SetUserError::UnmatchedParenthesis(rules[at].clone()))?;
        let mut users = self.users.write();
        let existing = users.get(name).cloned();
        let mut user = match &existing {
            Some(cell) => (**cell.current()).clone(),
            None => User::new(
                Bytes::copy_from_slice(name),
                &self.catalog,
                self.all_channels_default(),
            ),
        };
        for rule in &rules {
            user.apply(&self.catalog, rule, self.all_channels_default())
                .map_err(|err| SetUserError::Rule(rule.clone(), err))?;
        }
        match existing {
            Some(cell) => {
                let shrank = !cell.current().channels_within(&user);
                cell.replace(user);
                Ok(if shrank {
                    Changed::Channels(cell)
                } else {
                    Changed::Nothing
                })
            }
            None => {
                users.insert(Bytes::copy_from_slice(name), UserCell::new(user));
                Ok(Changed::Nothing)
            }
        }
    }

    /// ACL DELUSER: removes the users that exist; returns them, so that their connections
    /// can be closed.
    pub fn delete_users(&self, names: &[Bytes]) -> Vec<Arc<UserCell>> {
        let mut users = self.users.write();
        let deleted: Vec<Arc<UserCell>> =
            names.iter().filter_map(|name| users.remove(name)).collect();
        deleted.iter().for_each(|cell| cell.delete());
        deleted
    }

    /// Every user, in name order.
    pub fn users(&self) -> Vec<Arc<UserCell>> {
        self.users.read().values().cloned().collect()
    }

    /// A user as ACL LIST and the ACL file write it: `user <name> <rules>`.
    pub fn describe(&self, cell: &UserCell) -> Vec<u8> {
        let mut line = b"user ".to_vec();
        line.extend_from_slice(&cell.name);
        line.push(b' ');
        line.extend_from_slice(&cell.current().describe(&self.catalog));
        line
    }

    /// Replaces every user with those of `lines` (`user <name> <rules>...`, already split),
    /// all or none; the default user keeps its cell, so its connections stay logged in. The
    /// errors name each bad line as Redis's ACL LOAD does, `origin` standing for the file.
    /// Returns the users replaced, whose connections are to be closed.
    pub fn replace_users(
        &self,
        lines: &[(usize, Vec<Bytes>)],
        origin: &str,
    ) -> Result<Vec<Arc<UserCell>>, String> {
        let mut loaded: BTreeMap<Bytes, User> = BTreeMap::new();
        let mut errors = String::new();
        for (number, args) in lines {
            if args.first().map(|a| &a[..]) != Some(b"user") || args.len() < 2 {
                errors.push_str(&format!(
                    "{origin}:{number} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = &args[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{origin}:{number}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if loaded.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {number}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let mut user = User::new(name.clone(), &self.catalog, self.all_channels_default());
            let Ok(rules) = merge_selector_arguments(&args[2..]) else {
                errors.push_str(&format!(
                    "{origin}:{number}: Unmatched parenthesis in selector definition."
                ));
                continue;
            };
            let mut syntax_error = false;
            for rule in &rules {
                let rule = trim(rule);
                match user.apply(&self.catalog, rule, self.all_channels_default()) {
                    Ok(()) => {}
                    Err(err @ RuleError::UnknownCommand) => errors.push_str(&format!(
                        "{origin}:{number}: Error in applying operation '{}': {}. ",
                        String::from_utf8_lossy(rule),
                        err.message()
                    )),
                    Err(err) if !syntax_error => {
                        errors.push_str(&format!("{origin}:{number}: {}. ", err.message()));
                        syntax_error = true;
                    }
                    Err(_) => {}
                }
            }
            loaded.insert(name.clone(), user);
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(errors);
        }
        let default = loaded
            .remove(DEFAULT_USER.as_bytes())
            .unwrap_or_else(|| default_user(&self.catalog));
        let mut users: BTreeMap<Bytes, Arc<UserCell>> = loaded
            .into_iter()
            .map(|(name, user)| (name, UserCell::new(user)))
            .collect();
        users.insert(self.default.name.clone(), self.default.clone());
        let mut current = self.users.write();
        self.default.replace(default);
        let replaced: Vec<Arc<UserCell>> = std::mem::replace(&mut *current, users)
            .into_values()
            .filter(|cell| !Arc::ptr_eq(cell, &self.default))
            .collect();
        replaced.iter().for_each(|cell| cell.delete());
        Ok(replaced)
    }
}

/// The `default` user of a fresh server: everything, no password (`ACLCreateDefaultUser`).
fn default_user(catalog: &Catalog) -> User {
    let mut user = User::new(Bytes::from_static(DEFAULT_USER.as_bytes()), catalog, false);
    for rule in ["+@all", "~*", "&*", "on", "nopass"] {
        // Rules of Redis's own default user, which always apply.
        let _ = user.apply(catalog, rule.as_bytes(), false);
    }
    user
}

fn trim(rule: &[u8]) -> &[u8] {
    let end = rule
        .iter()
        .rposition(|b| !b"\t\r\n".contains(b))
        .map_or(0, |i| i + 1);
    let start = rule[..end]
        .iter()
        .position(|b| !b"\t\r\n".contains(b))
        .unwrap_or(end);
    &rule[start..end]
}
