//! A user and its selectors, changed by ACL rules (`on`, `>pass`, `+get`, `~key*`, `(...)`)
//! and described back as rules, as Redis 7.0's `ACLSetUser`, `ACLSetSelector` and
//! `ACLDescribeUser` do.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::catalog::{Catalog, Categories, CATEGORY_NAMES};
use super::sha256::sha256_hex;
use crate::types::pattern::glob_match;

/// Why a rule was refused; the message is Redis's (`ACLSetUserStringError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    UnknownCommand,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// How a command uses one of its keys, as its key specification says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAccess {
    pub read: bool,
    pub write: bool,
}

impl KeyAccess {
    /// Neither reads nor changes the value (EXISTS, TYPE, TTL): any pattern allows it.
    pub const META: KeyAccess = KeyAccess {
        read: false,
        write: false,
    };
    pub const READ: KeyAccess = KeyAccess {
        read: true,
        write: false,
    };
    pub const WRITE: KeyAccess = KeyAccess {
        read: false,
        write: true,
    };
    pub const READ_WRITE: KeyAccess = KeyAccess {
        read: true,
        write: true,
    };
}

/// A key pattern and what it allows: `~p` both, `%R~p` reads, `%W~p` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyPattern {
    pattern: Bytes,
    access: KeyAccess,
}

impl KeyPattern {
    /// Whether the pattern gives what `access` needs (a key it matches aside).
    fn grants(&self, access: KeyAccess) -> bool {
        (!access.read || self.access.read) && (!access.write || self.access.write)
    }

    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match (self.access.read, self.access.write) {
            (true, true) => b"~",
            (true, false) => b"%R~",
            _ => b"%W~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// What one command asks of a selector.
pub struct Request<'a> {
    pub command: usize,
    /// Commands any user may run (AUTH, HELLO, QUIT, ...).
    pub no_auth: bool,
    /// The argument after the command's name (after the subcommand's), for first-arg rules.
    pub first_arg: Option<&'a [u8]>,
    pub keys: &'a [(&'a [u8], KeyAccess)],
    /// Channels it publishes or subscribes to; `true` for PSUBSCRIBE's patterns.
    pub channels: &'a [(&'a [u8], bool)],
}

/// Why a request was denied, with the index of the key or channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

/// The permissions of a user, or of one of its `(...)` selectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    /// One bit per command id, and past them the bit of commands yet to come (`+@all`).
    allowed: Vec<u64>,
    /// Command id → first arguments allowed although the command is not (`+select|0`).
    first_args: BTreeMap<usize, Vec<Bytes>>,
    patterns: Vec<KeyPattern>,
    channels: Vec<Bytes>,
}

impl Selector {
    /// No permission, with the channels of `acl-pubsub-default`.
    pub fn new(commands: usize, all_channels: bool) -> Selector {
        Selector {
            all_keys: false,
            all_channels,
            all_commands: false,
            allowed: vec![0; (commands + 1).div_ceil(64)],
            first_args: BTreeMap::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, value: bool) {
        if value {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// Allows or denies a command, and with it its subcommands.
    fn change(&mut self, catalog: &Catalog, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.first_args.remove(&id);
        for &sub in &catalog.entry(id).subcommands {
            self.set_bit(sub, allow);
        }
    }

    fn change_category(&mut self, catalog: &Catalog, category: Categories, allow: bool) {
        let ids: Vec<usize> = catalog.in_category(category).collect();
        for id in ids {
            self.change(catalog, id, allow);
        }
    }

    fn set_all_commands(&mut self, allow: bool) {
        let fill = if allow { u64::MAX } else { 0 };
        self.allowed.iter_mut().for_each(|word| *word = fill);
        self.all_commands = allow;
        self.first_args.clear();
    }

    /// Whether `+@all` (or `allcommands`) set the bit of commands yet to come.
    fn allows_future_commands(&self, catalog: &Catalog) -> bool {
        self.bit(catalog.len())
    }

    /// Applies one rule (`ACLSetSelector`).
    pub fn apply(&mut self, catalog: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let is = |name: &str| op.eq_ignore_ascii_case(name.as_bytes());
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.patterns.clear();
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all_commands(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all_commands(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            self.add_key_pattern(op)?;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c[..] == *pattern) {
                self.channels.push(Bytes::copy_from_slice(pattern));
            }
            self.all_channels = false;
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let category = Categories::named(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.change_category(catalog, category, op[0] == b'+');
        } else if op[0] == b'+' {
            self.allow_command(catalog, &op[1..])?;
        } else if op[0] == b'-' {
            let id = catalog.lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change(catalog, id, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let (access, offset) = if op[0] == b'%' {
            let mut access = KeyAccess::META;
            let mut offset = 1;
            while offset < op.len() {
                match op[offset].to_ascii_uppercase() {
                    b'R' if !access.read => access.read = true,
                    b'W' if !access.write => access.write = true,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
            // `%~p` grants nothing; Redis 7.4 refuses it too (7.0 crashes on it).
            if access == KeyAccess::META {
                return Err(RuleError::Syntax);
            }
            (access, offset)
        } else {
            (KeyAccess::READ_WRITE, 1)
        };
        let pattern = &op[offset.min(op.len())..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.patterns.iter_mut().find(|p| p.pattern[..] == *pattern) {
            Some(existing) => {
                existing.access.read |= access.read;
                existing.access.write |= access.write;
            }
            None => self.patterns.push(KeyPattern {
                pattern: Bytes::copy_from_slice(pattern),
                access,
            }),
        }
        self.all_keys = false;
        Ok(())
    }

    /// `+command`, `+command|subcommand`, or `+command|first-arg` for a command without
    /// subcommands.
    fn allow_command(&mut self, catalog: &Catalog, name: &[u8]) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let id = catalog.lookup(name).ok_or(RuleError::UnknownCommand)?;
            self.change(catalog, id, true);
            return Ok(());
        };
        let (command, sub) = (&name[..bar], &name[bar + 1..]);
        let id = catalog.lookup(command).ok_or(RuleError::UnknownCommand)?;
        if catalog.entry(id).parent.is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        // A first argument with a space would describe back as several rules.
        if sub.is_empty() || has_spaces(sub) {
            return Err(RuleError::Syntax);
        }
        if !catalog.entry(id).subcommands.is_empty() {
            let sub_id = catalog.lookup(name).ok_or(RuleError::UnknownCommand)?;
            self.change(catalog, sub_id, true);
        } else {
            tracing::warn!(
                "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
                String::from_utf8_lossy(name)
            );
            let allowed = self.first_args.entry(id).or_default();
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                allowed.push(Bytes::copy_from_slice(sub));
            }
        }
        Ok(())
    }

    /// Whether this selector allows the request (`ACLSelectorCheckCmd`).
    pub fn check(&self, request: &Request<'_>) -> Result<(), Denied> {
        if !self.all_commands && !request.no_auth && !self.bit(request.command) {
            let first_arg_allowed = request.first_arg.is_some_and(|arg| {
                self.first_args
                    .get(&request.command)
                    .is_some_and(|allowed| allowed.iter().any(|a| a.eq_ignore_ascii_case(arg)))
            });
            if !first_arg_allowed {
                return Err(Denied::Command);
            }
        }
        if !self.all_keys {
            for (i, (key, access)) in request.keys.iter().enumerate() {
                if !self.allows_key(key, *access) {
                    return Err(Denied::Key(i));
                }
            }
        }
        if !self.all_channels {
            for (i, (channel, is_pattern)) in request.channels.iter().enumerate() {
                if !self.allows_channel(channel, *is_pattern) {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }

    fn allows_key(&self, key: &[u8], access: KeyAccess) -> bool {
        self.patterns
            .iter()
            .any(|p| p.grants(access) && glob_match(&p.pattern, key, false))
    }

    /// A channel matches a pattern of the selector; a PSUBSCRIBE pattern must equal one.
    fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        channel_allowed(&self.channels, channel, is_pattern)
    }

    /// `~*`, or `%R~*` / `%W~*` for what `access` needs.
    pub fn allows_every_key(&self, access: KeyAccess) -> bool {
        self.all_keys
            || self
                .patterns
                .iter()
                .any(|p| p.grants(access) && p.pattern[..] == b"*"[..])
    }

    /// Everything with no check: every command, key and channel.
    fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    /// The key patterns as ACL GETUSER shows them.
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, pattern) in self.patterns.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            pattern.describe(&mut out);
        }
        out
    }

    /// The channel patterns as ACL GETUSER shows them.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, channel) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(channel);
        }
        out
    }

    /// The command rules that rebuild this selector's bits (`ACLDescribeSelectorCommandRules`):
    /// `+@all` or `-@all`, the categories that fit best, then single commands.
    pub fn describe_commands(&self, catalog: &Catalog) -> String {
        let additive = !self.allows_future_commands(catalog);
        let mut rules = vec![if additive { "-@all" } else { "+@all" }.to_string()];
        let mut fake = Selector::new(catalog.len(), false);
        fake.set_all_commands(!additive);
        // The commands still to explain: the user's bits, with each applied category undone.
        let mut remaining = self.clone();
        let mut applied = [false; CATEGORY_NAMES.len()];
        loop {
            let mut best = None;
            let (mut min_diff, mut max_same) = (usize::MAX, 0);
            for (j, name) in CATEGORY_NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let category = Categories::of(name);
                let (mut on, mut off) = (0, 0);
                for id in catalog.in_category(category) {
                    if remaining.bit(id) {
                        on += 1;
                    } else {
                        off += 1;
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            let category = Categories::of(CATEGORY_NAMES[j]);
            fake.change_category(catalog, category, additive);
            remaining.change_category(catalog, category, !additive);
            rules.push(format!(
                "{}@{}",
                if additive { '+' } else { '-' },
                CATEGORY_NAMES[j]
            ));
            applied[j] = true;
        }
        for &id in catalog.order() {
            let bit = self.bit(id);
            if bit != fake.bit(id) {
                rules.push(format!(
                    "{}{}",
                    if bit { '+' } else { '-' },
                    catalog.entry(id).name
                ));
                fake.change(catalog, id, bit);
            }
            if !bit {
                for arg in self.first_args.get(&id).into_iter().flatten() {
                    rules.push(format!(
                        "+{}|{}",
                        catalog.entry(id).name,
                        String::from_utf8_lossy(arg)
                    ));
                }
            }
        }
        rules.join(" ")
    }

    /// Keys, channels and commands, as ACL LIST shows a selector (`ACLDescribeSelector`):
    /// GETUSER's forms, each followed by a space, and `resetchannels` before the channels
    /// unless they are all allowed.
    fn describe(&self, catalog: &Catalog, out: &mut Vec<u8>) {
        let keys = self.describe_keys();
        if !keys.is_empty() {
            out.extend_from_slice(&keys);
            out.push(b' ');
        }
        if !self.all_channels {
            out.extend_from_slice(b"resetchannels ");
        }
        let channels = self.describe_channels();
        if !channels.is_empty() {
            out.extend_from_slice(&channels);
            out.push(b' ');
        }
        out.extend_from_slice(self.describe_commands(catalog).as_bytes());
    }
}

/// Whether `patterns` allow a channel; a PSUBSCRIBE pattern must equal one of them.
pub fn channel_allowed(patterns: &[Bytes], channel: &[u8], is_pattern: bool) -> bool {
    patterns.iter().any(|p| match is_pattern {
        true => p[..] == *channel,
        false => glob_match(p, channel, false),
    })
}

/// Whether a name or pattern has a space or NUL, which ACL rules refuse.
pub fn has_spaces(text: &[u8]) -> bool {
    text.iter()
        .any(|&b| b == 0 || b.is_ascii_whitespace() || b == 0x0b)
}

/// A user: whether it may log in, its passwords (SHA-256, hex) and its selectors, the first
/// of which is its root (the rules given outside parentheses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: Bytes,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (true) or `skip-sanitize-payload` (false); a new user has neither.
    sanitize_payload: Option<bool>,
    passwords: Vec<String>,
    selectors: Vec<Selector>,
}

impl User {
    /// A new user: off, no password, no permission (`ACLCreateUser`).
    pub fn new(name: Bytes, catalog: &Catalog, all_channels: bool) -> User {
        User {
            name,
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(catalog.len(), all_channels)],
        }
    }

    /// Applies one rule (`ACLSetUser`).
    pub fn apply(
        &mut self,
        catalog: &Catalog,
        op: &[u8],
        all_channels: bool,
    ) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |name: &str| op.eq_ignore_ascii_case(name.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize_payload = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize_payload = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = password_hash(op)?;
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = password_hash(op)?;
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut selector = Selector::new(catalog.len(), all_channels);
            let inner = &op[1..op.len() - 1];
            for rule in shale_protocol::split_args(inner).unwrap_or_default() {
                selector.apply(catalog, &rule)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let mut root = Selector::new(catalog.len(), all_channels);
            root.set_all_commands(false);
            self.selectors = vec![root];
            self.enabled = false;
            self.sanitize_payload = Some(true);
        } else {
            self.selectors[0].apply(catalog, op)?;
        }
        Ok(())
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// The `(...)` selectors.
    pub fn extra_selectors(&self) -> &[Selector] {
        &self.selectors[1..]
    }

    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    /// Whether `password` logs this user in (it must be enabled).
    pub fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = sha256_hex(password);
        self.passwords
            .iter()
            .any(|p| constant_time_eq(p.as_bytes(), hash.as_bytes()))
    }

    /// Whether every command, key and channel is allowed, so no check is needed.
    pub fn unrestricted(&self) -> bool {
        self.selectors.iter().any(Selector::unrestricted)
    }

    /// Whether one selector allows the request; otherwise the denial Redis reports: the
    /// command if no selector allows it, else the last key or channel (`ACLCheckAllUserCommandPerm`).
    pub fn check(&self, request: &Request<'_>) -> Result<(), Denied> {
        let mut relevant = Denied::Command;
        for selector in &self.selectors {
            match selector.check(request) {
                Ok(()) => return Ok(()),
                Err(denied) if denied > relevant => relevant = denied,
                Err(_) => {}
            }
        }
        Err(relevant)
    }

    /// Whether one selector allows the command and `access` to every key.
    pub fn allows_with_every_key(&self, request: &Request<'_>, access: KeyAccess) -> bool {
        self.selectors
            .iter()
            .any(|s| s.check(request).is_ok() && s.allows_every_key(access))
    }

    /// Whether every channel `self` allows, `other` allows too (to know whether subscribers
    /// must be checked after a change).
    pub fn channels_within(&self, other: &User) -> bool {
        let Some(upcoming) = other.channel_patterns() else {
            return true;
        };
        self.selectors
            .iter()
            .all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(c)))
    }

    /// The channel patterns of every selector, for checking a subscriber after a change
    /// (`ACLKillPubsubClientsIfNeeded`); `None` if some selector allows every channel.
    pub fn channel_patterns(&self) -> Option<Vec<Bytes>> {
        if self.selectors.iter().any(|s| s.all_channels) {
            return None;
        }
        Some(
            self.selectors
                .iter()
                .flat_map(|s| s.channels.iter().cloned())
                .collect(),
        )
    }

    /// The flags as ACL GETUSER lists them, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// The rules that rebuild this user, as ACL LIST shows them after `user <name> `
    /// (`ACLDescribeUser`).
    pub fn describe(&self, catalog: &Catalog) -> Vec<u8> {
        let mut out = Vec::new();
        for flag in self.flag_names() {
            out.extend_from_slice(flag.as_bytes());
            out.push(b' ');
        }
        for password in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(password.as_bytes());
            out.push(b' ');
        }
        self.selectors[0].describe(catalog, &mut out);
        for selector in &self.selectors[1..] {
            out.extend_from_slice(b" (");
            selector.describe(catalog, &mut out);
            out.push(b')');
        }
        out
    }
}

/// The hash a `>password`, `<password`, `#hash` or `!hash` rule names.
fn password_hash(op: &[u8]) -> Result<String, RuleError> {
    let rest = &op[1..];
    if op[0] == b'>' || op[0] == b'<' {
        return Ok(sha256_hex(rest));
    }
    let valid = rest.len() == 64 && rest.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !valid {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(rest).into_owned())
}

/// Compares without stopping at the first difference, so timing tells nothing of a hash.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Merges a selector spread over several arguments (`(+get`, `~key)`) into one, as Redis's
/// `ACLMergeSelectorArguments`; `Err` names the argument whose parenthesis is not closed.
pub fn merge_selector_arguments(args: &[Bytes]) -> Result<Vec<Bytes>, usize> {
    let mut merged = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, arg) in args.iter().enumerate() {
        // A new opening parenthesis starts over, as in Redis.
        if arg.first() == Some(&b'(') && arg.last() != Some(&b')') {
            open = Some((j, arg.to_vec()));
            continue;
        }
        if let Some((start, mut selector)) = open.take() {
            selector.push(b' ');
            selector.extend_from_slice(arg);
            if arg.last() == Some(&b')') {
                merged.push(Bytes::from(selector));
            } else {
                open = Some((start, selector));
            }
            continue;
        }
        merged.push(arg.clone());
    }
    match open {
        Some((start, _)) => Err(start),
        None => Ok(merged),
    }
}

#[cfg(test)]
mod tests {
    use super::super::catalog::CatalogEntry;
    use super::*;

    fn catalog() -> Catalog {
        let read = Categories::of("read").with(Categories::of("string"));
        let write = Categories::of("write").with(Categories::of("string"));
        Catalog::new(vec![
            CatalogEntry {
                name: "get",
                parent: None,
                subcommands: vec![],
                categories: read,
            },
            CatalogEntry {
                name: "set",
                parent: None,
                subcommands: vec![],
                categories: write,
            },
            CatalogEntry {
                name: "config",
                parent: None,
                subcommands: vec![3],
                categories: Categories::NONE,
            },
            CatalogEntry {
                name: "config|get",
                parent: Some(2),
                subcommands: vec![],
                categories: Categories::of("admin"),
            },
            CatalogEntry {
                name: "select",
                parent: None,
                subcommands: vec![],
                categories: Categories::of("connection"),
            },
        ])
    }

    fn user(rules: &[&str]) -> User {
        let catalog = catalog();
        let mut user = User::new(Bytes::from("u"), &catalog, false);
        for rule in rules {
            user.apply(&catalog, rule.as_bytes(), false).unwrap();
        }
        user
    }

    fn request<'a>(command: usize, keys: &'a [(&'a [u8], KeyAccess)]) -> Request<'a> {
        Request {
            command,
            no_auth: false,
            first_arg: None,
            keys,
            channels: &[],
        }
    }

    #[test]
    fn rules_describe_back_as_redis_writes_them() {
        let catalog = catalog();
        let describe = |rules: &[&str]| String::from_utf8(user(rules).describe(&catalog)).unwrap();
        assert_eq!(describe(&[]), "off resetchannels -@all");
        assert_eq!(
            describe(&["on", "nopass", "~*", "&*", "+@all"]),
            "on nopass ~* &* +@all"
        );
        assert_eq!(
            describe(&["on", ">pw", "~k*", "%R~r*", "+@read", "+config|get"]),
            format!(
                "on #{} ~k* %R~r* resetchannels -@all +@read +@admin",
                sha256_hex(b"pw")
            )
        );
        assert_eq!(
            describe(&["+@all", "-set"]),
            "off resetchannels +@all -@write"
        );
        assert_eq!(
            describe(&["+select|0", "(~x +get)"]),
            "off resetchannels -@all +select|0 (~x resetchannels -@all +@read)"
        );
    }

    #[test]
    fn checks_follow_commands_keys_and_selectors() {
        let u = user(&["+get", "%R~r*", "(+set ~w*)"]);
        assert_eq!(u.check(&request(0, &[(b"r1", KeyAccess::READ)])), Ok(()));
        assert_eq!(
            u.check(&request(0, &[(b"x", KeyAccess::READ)])),
            Err(Denied::Key(0))
        );
        assert_eq!(u.check(&request(1, &[(b"w1", KeyAccess::WRITE)])), Ok(()));
        assert_eq!(
            u.check(&request(1, &[(b"r1", KeyAccess::WRITE)])),
            Err(Denied::Key(0))
        );
        assert_eq!(u.check(&request(4, &[])), Err(Denied::Command));
        let first_arg = user(&["+select|0"]);
        let select = |arg: &'static [u8]| Request {
            first_arg: Some(arg),
            ..request(4, &[])
        };
        assert_eq!(first_arg.check(&select(b"0")), Ok(()));
        assert_eq!(first_arg.check(&select(b"1")), Err(Denied::Command));
    }

    #[test]
    fn bad_rules_are_refused_with_redis_reasons() {
        let catalog = catalog();
        let mut u = User::new(Bytes::from("u"), &catalog, false);
        let mut fails = |rule: &str| u.apply(&catalog, rule.as_bytes(), false).unwrap_err();
        assert_eq!(fails("+nosuch"), RuleError::UnknownCommand);
        assert_eq!(fails("+@nosuch"), RuleError::UnknownCommand);
        assert_eq!(fails("bogus"), RuleError::Syntax);
        assert_eq!(fails("<nopass"), RuleError::NoSuchPassword);
        assert_eq!(fails("#abc"), RuleError::BadHash);
        assert_eq!(fails("+config|get|x"), RuleError::FirstArgOfSubcommand);
        assert_eq!(fails("%X~k"), RuleError::Syntax);
        assert_eq!(fails("%~k"), RuleError::Syntax);
        assert_eq!(fails("(\"\")"), RuleError::Syntax);
        assert_eq!(fails("+select|0 allkeys"), RuleError::Syntax);
        u.apply(&catalog, b"allkeys", false).unwrap();
        assert_eq!(
            u.apply(&catalog, b"~k", false).unwrap_err(),
            RuleError::KeyAfterAll
        );
        assert_eq!(
            merge_selector_arguments(&[Bytes::from("(+get"), Bytes::from("~k)")]),
            Ok(vec![Bytes::from("(+get ~k)")])
        );
        assert_eq!(merge_selector_arguments(&[Bytes::from("(+get")]), Err(0));
    }
}
