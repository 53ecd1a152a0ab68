//! Redis's rules for converting between RESP replies and Lua values, both ways.

use bytes::Bytes;
use mlua::{Lua, Table, Value};
use shale_protocol::{format_double, Reply};

/// A command's reply as `redis.call` hands it to Lua: RESP2 rules unless the script chose
/// RESP3 with `redis.setresp(3)`.
pub fn reply_to_lua(lua: &Lua, reply: Reply, resp3: bool) -> mlua::Result<Value> {
    let string = |bytes: &[u8]| lua.create_string(bytes).map(Value::String);
    let tagged = |tag: &str, value: Value| -> mlua::Result<Value> {
        let table = lua.create_table()?;
        table.raw_set(tag, value)?;
        Ok(Value::Table(table))
    };
    match reply {
        Reply::Status(text) => tagged("ok", string(text.as_bytes())?),
        Reply::Error(line) => Ok(Value::Table(error_table(lua, &line)?)),
        Reply::Integer(n) => Ok(Value::Number(n as f64)),
        Reply::Bulk(data) => string(&data),
        Reply::Null | Reply::NullArray if resp3 => Ok(Value::Nil),
        Reply::Null | Reply::NullArray => Ok(Value::Boolean(false)),
        Reply::Array(items) | Reply::Push(items) | Reply::Sequence(items) => {
            array(lua, items, resp3)
        }
        Reply::BulkMap(bulks) if resp3 => {
            let map = lua.create_table_with_capacity(0, bulks.len() / 2)?;
            let mut items = bulks.iter();
            while let (Some(k), Some(v)) = (items.next(), items.next()) {
                map.raw_set(lua.create_string(k)?, lua.create_string(v)?)?;
            }
            tagged("map", Value::Table(map))
        }
        Reply::Bulks(bulks) | Reply::BulkMap(bulks) => {
            let table = lua.create_table_with_capacity(bulks.len(), 0)?;
            for (index, item) in bulks.iter().enumerate() {
                table.raw_set(index + 1, lua.create_string(item)?)?;
            }
            Ok(Value::Table(table))
        }
        Reply::Set(items) if resp3 => {
            let set = lua.create_table()?;
            for item in items {
                set.raw_set(reply_to_lua(lua, item, resp3)?, true)?;
            }
            tagged("set", Value::Table(set))
        }
        Reply::Set(items) => array(lua, items, resp3),
        Reply::Map(pairs) if resp3 => {
            let map = lua.create_table()?;
            for (k, v) in pairs {
                map.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            tagged("map", Value::Table(map))
        }
        Reply::Map(pairs) => array(
            lua,
            pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            resp3,
        ),
        Reply::Double(d) if resp3 => tagged("double", Value::Number(d)),
        Reply::Double(d) => string(format_double(d).as_bytes()),
        Reply::PrintedDouble(text) if resp3 => {
            tagged("double", Value::Number(text.parse().unwrap_or(0.0)))
        }
        Reply::PrintedDouble(text) => string(text.as_bytes()),
        Reply::Bool(b) if resp3 => Ok(Value::Boolean(b)),
        Reply::Bool(b) => Ok(Value::Number(b as i64 as f64)),
        Reply::Verbatim(text) if resp3 => {
            let verbatim = lua.create_table()?;
            verbatim.raw_set("format", "txt")?;
            verbatim.raw_set("string", lua.create_string(&text)?)?;
            tagged("verbatim_string", Value::Table(verbatim))
        }
        Reply::Verbatim(text) => string(&text),
    }
}

fn array(lua: &Lua, items: Vec<Reply>, resp3: bool) -> mlua::Result<Value> {
    let table = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.into_iter().enumerate() {
        table.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
    }
    Ok(Value::Table(table))
}

/// The field of an error table that came from a command's reply: INFO counted that error
/// when the command answered, so EVAL's reply does not count it again. Redis names it so too.
const COUNTED: &str = "ignore_err_stats_update";

/// Marks the error table a command's reply became as counted already.
pub fn mark_counted(error: &Table) -> mlua::Result<()> {
    error.raw_set(COUNTED, true)
}

/// Whether a script's result is an error table that INFO has counted already.
pub fn counted_error(value: &Value) -> bool {
    matches!(value, Value::Table(table)
        if table.raw_get::<Value>(COUNTED).is_ok_and(|v| v == Value::Boolean(true)))
}

/// `{err = "CODE message"}`, the Lua form of an error reply line.
pub fn error_table(lua: &Lua, line: &str) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set("err", line.trim_end_matches(['\r', '\n']))?;
    Ok(table)
}

/// A script's return value as the reply to EVAL. `resp3` is the protocol the script chose.
/// A table that holds itself gets Redis's "reached lua stack limit", as does nesting deeper
/// than [`MAX_DEPTH`]; a reply larger than `limit` bytes is refused, since a table holding
/// another one many times (`t = {u, u}; u = {v, v} ...`) stands for a reply of any size.
pub fn lua_to_reply(value: &Value, resp3: bool, limit: usize) -> Reply {
    let mut conversion = Conversion {
        resp3,
        budget: limit,
        path: Vec::new(),
    };
    conversion.reply(value).unwrap_or_else(|refused| {
        Reply::Error(match refused {
            Refused::StackLimit => "ERR reached lua stack limit".into(),
            Refused::TooLarge => "ERR the script's reply is too large".into(),
        })
    })
}

/// Tables nested deeper than this are refused.
const MAX_DEPTH: usize = 128;

/// What a reply element costs the budget besides its bytes.
const ELEMENT_COST: usize = 48;

enum Refused {
    StackLimit,
    TooLarge,
}

struct Conversion {
    resp3: bool,
    /// Bytes the rest of the reply may take.
    budget: usize,
    /// The tables being converted, outermost first.
    path: Vec<*const std::ffi::c_void>,
}

/// A Lua number as Redis's `(long long)` cast turns it into an integer reply on x86-64:
/// truncated toward zero, and the CPU's "integer indefinite", i64::MIN, when it is NaN or
/// out of range (2^63, which is what INCRBY's reply 2^63-1 becomes as a double, included).
fn as_long_long(n: f64) -> i64 {
    const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() || !(-TWO_TO_63..TWO_TO_63).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

impl Conversion {
    fn spend(&mut self, bytes: usize) -> Result<(), Refused> {
        self.budget = self
            .budget
            .checked_sub(ELEMENT_COST.saturating_add(bytes))
            .ok_or(Refused::TooLarge)?;
        Ok(())
    }

    fn reply(&mut self, value: &Value) -> Result<Reply, Refused> {
        Ok(match value {
            Value::String(s) => {
                let bytes = s.as_bytes();
                self.spend(bytes.len())?;
                Reply::Bulk(Bytes::copy_from_slice(&bytes))
            }
            Value::Boolean(true) if !self.resp3 => Reply::Integer(1),
            Value::Boolean(false) if !self.resp3 => Reply::Null,
            Value::Boolean(b) => Reply::Bool(*b),
            Value::Integer(n) => Reply::Integer(*n),
            Value::Number(n) => Reply::Integer(as_long_long(*n)),
            Value::Table(table) => {
                let at = table.to_pointer();
                if self.path.len() >= MAX_DEPTH || self.path.contains(&at) {
                    return Err(Refused::StackLimit);
                }
                self.spend(0)?;
                self.path.push(at);
                let reply = self.table(table);
                self.path.pop();
                reply?
            }
            _ => Reply::Null,
        })
    }

    fn table(&mut self, table: &Table) -> Result<Reply, Refused> {
        let field = |name: &str| table.raw_get::<Value>(name).unwrap_or(Value::Nil);
        if let Value::String(err) = field("err") {
            let line = err.to_string_lossy().replace(['\r', '\n'], " ");
            self.spend(line.len())?;
            return Ok(Reply::Error(
                line.trim_start_matches('-').to_string().into(),
            ));
        }
        if let Value::String(ok) = field("ok") {
            let line = ok.to_string_lossy().replace(['\r', '\n'], " ");
            self.spend(line.len())?;
            return Ok(Reply::Status(line.into()));
        }
        match field("double") {
            Value::Number(d) => return Ok(Reply::Double(d)),
            Value::Integer(n) => return Ok(Reply::Double(n as f64)),
            _ => {}
        }
        if let Value::Table(map) = field("map") {
            let mut pairs = Vec::new();
            for (k, v) in map.pairs::<Value, Value>().filter_map(Result::ok) {
                let k = self.reply(&k)?;
                pairs.push((k, self.reply(&v)?));
            }
            return Ok(Reply::Map(pairs));
        }
        if let Value::Table(set) = field("set") {
            let mut items = Vec::new();
            for (k, _) in set.pairs::<Value, Value>().filter_map(Result::ok) {
                items.push(self.reply(&k)?);
            }
            return Ok(Reply::Set(items));
        }
        let mut items = Vec::new();
        for i in 1.. {
            match table.raw_get::<Value>(i) {
                Ok(Value::Nil) | Err(_) => break,
                Ok(item) => items.push(self.reply(&item)?),
            }
        }
        Ok(Reply::Array(items))
    }
}

/// The arguments of `redis.call`: strings as they are, numbers as Redis prints them.
pub fn command_args(values: &[Value]) -> Option<Vec<Bytes>> {
    values
        .iter()
        .map(|value| match value {
            Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(n) => Some(Bytes::from(n.to_string())),
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e17 => {
                Some(Bytes::from((*n as i64).to_string()))
            }
            Value::Number(n) => Some(Bytes::from(format_double(*n))),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn converted(source: &str, limit: usize) -> Reply {
        let lua = Lua::new();
        let value: Value = lua.load(source).eval().expect("the script runs");
        lua_to_reply(&value, false, limit)
    }

    fn error(reply: Reply) -> String {
        match reply {
            Reply::Error(line) => line.to_string(),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn shared_tables_expand_within_the_budget_and_are_refused_beyond_it() {
        let shared = converted("local t = {'ab'} return {t, t}", 1 << 20);
        let inner = Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"ab"))]);
        assert_eq!(shared, Reply::Array(vec![inner.clone(), inner]));
        // 2^40 leaves from 40 small tables: refused once the budget is spent.
        let doubling = "local t = {'x'} for i = 1, 40 do t = {t, t} end return t";
        assert_eq!(
            error(converted(doubling, 1 << 20)),
            "ERR the script's reply is too large"
        );
    }

    #[test]
    fn tables_that_hold_themselves_or_nest_too_deep_reach_the_stack_limit() {
        for source in [
            "local t = {} t[1] = t return t",
            "local t = {} t[1] = {1, t} t[2] = t return t",
            "local t = {} t[1] = {map = {k = t}} return t",
            "local t = {1} for i = 1, 200 do t = {t} end return t",
        ] {
            assert_eq!(
                error(converted(source, 1 << 30)),
                "ERR reached lua stack limit",
                "{source}"
            );
        }
        let deep = converted(
            "local t = {1} for i = 1, 100 do t = {t} end return t",
            1 << 30,
        );
        assert!(matches!(deep, Reply::Array(_)));
    }
}
