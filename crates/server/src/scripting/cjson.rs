//! The `cjson` library Redis scripts expect: `cjson.encode`, `cjson.decode` and `cjson.null`,
//! with lua-cjson's rules (tables with keys 1..n are arrays, other tables objects).

use mlua::{LightUserData, Lua, Table, Value};
use serde_json::{Map, Number, Value as Json};

/// Nesting deeper than this is refused, as lua-cjson does.
const MAX_DEPTH: usize = 1000;

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    cjson.raw_set("null", null())?;
    cjson.raw_set(
        "encode",
        lua.create_function(|_, value: Value| {
            let json = to_json(&value, 0).map_err(mlua::Error::RuntimeError)?;
            Ok(json.to_string())
        })?,
    )?;
    cjson.raw_set(
        "decode",
        lua.create_function(|lua, text: mlua::String| {
            let json: Json = serde_json::from_slice(&text.as_bytes()).map_err(|e| {
                mlua::Error::RuntimeError(format!("Expected value but found invalid token: {e}"))
            })?;
            from_json(lua, &json)
        })?,
    )?;
    Ok(cjson)
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn to_json(value: &Value, depth: usize) -> Result<Json, String> {
    if depth > MAX_DEPTH {
        return Err("Cannot serialise, excessive nesting".into());
    }
    Ok(match value {
        Value::Nil | Value::LightUserData(_) => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(n) => Json::Number((*n).into()),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e15 => Json::Number((*n as i64).into()),
        Value::Number(n) => Number::from_f64(*n)
            .map(Json::Number)
            .ok_or("Cannot serialise number: must not be NaN or Inf")?,
        Value::String(s) => Json::String(s.to_string_lossy()),
        Value::Table(table) => table_to_json(table, depth)?,
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    })
}

fn table_to_json(table: &Table, depth: usize) -> Result<Json, String> {
    let mut entries = Vec::new();
    let mut max_index = 0;
    let mut is_array = true;
    for pair in table.pairs::<Value, Value>() {
        let (key, value) = pair.map_err(|e| e.to_string())?;
        match &key {
            Value::Integer(i) if *i > 0 => max_index = max_index.max(*i),
            Value::Number(n) if *n > 0.0 && n.fract() == 0.0 => {
                max_index = max_index.max(*n as i64)
            }
            _ => is_array = false,
        }
        entries.push((key, value));
    }
    if is_array && max_index as usize == entries.len() && !entries.is_empty() {
        let mut items = vec![Json::Null; entries.len()];
        for (key, value) in &entries {
            let index = match key {
                Value::Integer(i) => *i as usize,
                Value::Number(n) => *n as usize,
                _ => continue,
            };
            items[index - 1] = to_json(value, depth + 1)?;
        }
        return Ok(Json::Array(items));
    }
    let mut object = Map::new();
    for (key, value) in &entries {
        let name = match key {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(i) => i.to_string(),
            Value::Number(n) => n.to_string(),
            _ => return Err("Cannot serialise table: table key must be a number or string".into()),
        };
        object.insert(name, to_json(value, depth + 1)?);
    }
    Ok(Json::Object(object))
}

fn from_json(lua: &Lua, json: &Json) -> mlua::Result<Value> {
    Ok(match json {
        Json::Null => null(),
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, from_json(lua, item)?)?;
            }
            Value::Table(table)
        }
        Json::Object(object) => {
            let table = lua.create_table_with_capacity(0, object.len())?;
            for (key, value) in object {
                table.raw_set(key.as_str(), from_json(lua, value)?)?;
            }
            Value::Table(table)
        }
    })
}
