//! Reads what RocksDB serializes for a remote compaction: the `CompactionServiceResult` a
//! worker answers, so the node can check it before RocksDB installs it (the node's RocksDB
//! renames the files it names into the database and takes a damaged one for corruption of
//! the database itself, an unrecoverable background error, so nothing a worker answers
//! reaches it unchecked), and the input files a `CompactionServiceInput` names.
//!
//! The format is RocksDB's options-string serialization (`compaction_service_job.cc`): a
//! little-endian format version (1), then `name=value;` fields, a struct's value in braces,
//! a vector's elements between `:` (an element in braces if it holds a `:`, the whole
//! vector in braces if it holds a `=`), strings hex-encoded. What RocksDB would read
//! differently from this reader is refused: a name given twice (RocksDB keeps the last), spaces
//! around a name or value (RocksDB trims them), braces nested deeper than a result's.

use std::ops::Range;

/// The fields of a result the node checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompactionResult {
    /// RocksDB's status code of the compaction (0 is OK).
    pub status_code: u8,
    pub output_path: Vec<u8>,
    pub output_files: Vec<OutputFile>,
    /// Where the output path's value lies in the serialized result.
    output_path_span: Range<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutputFile {
    pub file_name: Vec<u8>,
    pub file_size: u64,
    pub checksum: Vec<u8>,
    pub checksum_function: Vec<u8>,
}

const FORMAT_VERSION: u32 = 1;
const HEADER: usize = 4;
/// Deeper than any result RocksDB writes (5 levels).
const MAX_DEPTH: usize = 16;

/// The body of a serialized input or result, after its format version.
fn body(serialized: &[u8]) -> Option<&[u8]> {
    let version = u32::from_le_bytes(serialized.get(..HEADER)?.try_into().ok()?);
    (version == FORMAT_VERSION).then(|| &serialized[HEADER..])
}

/// The value of top-level field `name` of a serialized input or result, and its body.
fn field<'a>(serialized: &'a [u8], name: &[u8]) -> Option<(&'a [u8], Range<usize>)> {
    let body = body(serialized)?;
    let (_, span) = fields(body, 0..body.len())?
        .into_iter()
        .find(|(field, _)| *field == name)?;
    Some((body, span))
}

/// The column family a serialized `CompactionServiceInput` compacts.
pub(crate) fn input_family(serialized: &[u8]) -> Option<String> {
    let (body, span) = field(serialized, b"cf_name")?;
    String::from_utf8(unhex(&body[span])?).ok()
}

/// The names of the table files a serialized `CompactionServiceInput` compacts.
pub(crate) fn input_files(serialized: &[u8]) -> Option<Vec<String>> {
    let (body, span) = field(serialized, b"input_files")?;
    if span.is_empty() {
        return Some(Vec::new());
    }
    split(body, span, b':')?
        .into_iter()
        .map(|name| String::from_utf8(unhex(&body[name])?).ok())
        .collect()
}

impl CompactionResult {
    pub(crate) fn parse(serialized: &[u8]) -> Option<CompactionResult> {
        let body = body(serialized)?;
        let mut result = CompactionResult {
            status_code: u8::MAX,
            output_path: Vec::new(),
            output_files: Vec::new(),
            output_path_span: 0..0,
        };
        let (mut status, mut path, mut files) = (false, false, false);
        for (name, span) in fields(body, 0..body.len())? {
            let value = &body[span.clone()];
            match name {
                b"status" => {
                    let inner = unbrace(body, span)?;
                    let code = fields(body, inner)?
                        .into_iter()
                        .find(|(name, _)| *name == b"code")?;
                    result.status_code = number(&body[code.1])?;
                    status = true;
                }
                b"output_path" => {
                    result.output_path = unhex(value)?;
                    result.output_path_span = span;
                    path = true;
                }
                b"output_files" => {
                    result.output_files = output_files(body, span)?;
                    files = true;
                }
                _ => {}
            }
        }
        (status && path && files).then_some(result)
    }

    /// The serialized result with its output path replaced: the worker names the directory as
    /// it sees it, the node renames the files from where it sees them.
    /// The bytes of the files it wrote.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.output_files.iter().map(|file| file.file_size).sum()
    }

    pub(crate) fn with_output_path(&self, serialized: &[u8], path: &[u8]) -> Vec<u8> {
        let span = HEADER + self.output_path_span.start..HEADER + self.output_path_span.end;
        let mut rewritten = Vec::with_capacity(serialized.len() + path.len() * 2);
        rewritten.extend_from_slice(&serialized[..span.start]);
        for byte in path {
            rewritten.extend_from_slice(format!("{byte:02X}").as_bytes());
        }
        rewritten.extend_from_slice(&serialized[span.end..]);
        rewritten
    }
}

fn output_files(body: &[u8], span: Range<usize>) -> Option<Vec<OutputFile>> {
    if span.is_empty() {
        return Some(Vec::new());
    }
    let inner = unbrace(body, span)?;
    split(body, inner, b':')?
        .into_iter()
        .map(|element| {
            let mut element = unbrace(body, element)?;
            while let Some(inner) = unbrace(body, element.clone()) {
                element = inner;
            }
            let mut file = OutputFile {
                file_name: Vec::new(),
                file_size: 0,
                checksum: Vec::new(),
                checksum_function: Vec::new(),
            };
            for (name, span) in fields(body, element)? {
                let value = &body[span];
                match name {
                    b"file_name" => file.file_name = unhex(value)?,
                    b"file_size" => file.file_size = number(value)?,
                    b"file_checksum" => file.checksum = unhex(value)?,
                    b"file_checksum_func_name" => file.checksum_function = unhex(value)?,
                    _ => {}
                }
            }
            Some(file)
        })
        .collect()
}

/// The `name=value` fields between `;` in `span`, each value's span (braces included).
fn fields(body: &[u8], span: Range<usize>) -> Option<Vec<(&[u8], Range<usize>)>> {
    let mut fields: Vec<(&[u8], Range<usize>)> = Vec::new();
    for field in split(body, span, b';')? {
        if field.is_empty() {
            continue;
        }
        let eq = body[field.clone()].iter().position(|&b| b == b'=')?;
        let (name, value) = (
            &body[field.start..field.start + eq],
            field.start + eq + 1..field.end,
        );
        let spaced = |text: &[u8]| {
            text.first().is_some_and(u8::is_ascii_whitespace)
                || text.last().is_some_and(u8::is_ascii_whitespace)
        };
        if name.is_empty() || spaced(name) || spaced(&body[value.clone()]) {
            return None;
        }
        if fields.iter().any(|(seen, _)| *seen == name) {
            return None;
        }
        fields.push((name, value));
    }
    Some(fields)
}

/// The parts of `span` between `separator`s outside braces.
fn split(body: &[u8], span: Range<usize>, separator: u8) -> Option<Vec<Range<usize>>> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, span.start);
    for i in span.clone() {
        match body[i] {
            b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return None;
                }
            }
            b'}' => depth = depth.checked_sub(1)?,
            b if b == separator && depth == 0 => {
                parts.push(start..i);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    parts.push(start..span.end);
    Some(parts)
}

/// The inside of a value in braces, if one pair of braces holds all of it.
fn unbrace(body: &[u8], span: Range<usize>) -> Option<Range<usize>> {
    let value = &body[span.clone()];
    if value.len() < 2 || value[0] != b'{' || value[value.len() - 1] != b'}' {
        return None;
    }
    let inner = span.start + 1..span.end - 1;
    // `{a}:{b}` starts and ends with braces that are not one pair.
    split(body, inner.clone(), b'\0').map(|_| inner)
}

fn number<T: std::str::FromStr>(value: &[u8]) -> Option<T> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

fn unhex(value: &[u8]) -> Option<Vec<u8>> {
    if !value.len().is_multiple_of(2) {
        return None;
    }
    value
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result and an input RocksDB 11.8.1 serialized (one L0 compaction of the meta family).
    const RESULT: &[u8] = include_bytes!("testdata/result-rocksdb-11.8.1.bin");
    const INPUT: &[u8] = include_bytes!("testdata/input-rocksdb-11.8.1.bin");

    fn serialized(body: &str) -> Vec<u8> {
        let mut bytes = FORMAT_VERSION.to_le_bytes().to_vec();
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }

    fn hex(text: &str) -> String {
        text.bytes().map(|b| format!("{b:02X}")).collect()
    }

    #[test]
    fn reads_a_result_rocksdb_wrote() {
        let result = CompactionResult::parse(RESULT).expect("parses");
        assert_eq!(result.status_code, 0);
        assert!(result
            .output_path
            .ends_with(b"/remote-compaction/18ef105fc1783a20-c40-2"));
        assert_eq!(result.output_files.len(), 1);
        let file = &result.output_files[0];
        assert_eq!(file.file_name, b"000043.sst");
        assert_eq!(file.file_size, 13_088_521);
        assert_eq!(file.checksum, [0x03, 0xB6, 0x20, 0x7B]);
        assert_eq!(file.checksum_function, b"FileChecksumCrc32c");
    }

    #[test]
    fn reads_several_files_and_a_failure() {
        let file = |name: &str, size: u64| {
            format!(
                "{{{{file_checksum=0A0B0C0D;file_size={size};table_properties={{counts=0:1;}};file_name={};file_checksum_func_name={};}}}}",
                hex(name),
                hex("FileChecksumCrc32c")
            )
        };
        let two = format!(
            "output_files={{{}:{}}};output_path={};status={{code=0;}};",
            file("000012.sst", 4000),
            file("000013.sst", 5),
            hex("/tmp/job")
        );
        let result = CompactionResult::parse(&serialized(&two)).expect("parses");
        let names: Vec<_> = result
            .output_files
            .iter()
            .map(|f| f.file_name.clone())
            .collect();
        assert_eq!(names, [b"000012.sst".to_vec(), b"000013.sst".to_vec()]);
        assert_eq!(result.output_files[1].file_size, 5);
        assert_eq!(result.output_path, b"/tmp/job");

        let failed = CompactionResult::parse(&serialized(
            "output_files=;output_path=;status={message=;code=4;};",
        ))
        .expect("parses");
        assert!(failed.output_files.is_empty());
        assert_eq!(failed.status_code, 4);
    }

    #[test]
    fn rewrites_only_the_output_path() {
        let result = CompactionResult::parse(RESULT).expect("parses");
        let moved = result.with_output_path(RESULT, b"/data/db/job");
        let reread = CompactionResult::parse(&moved).expect("parses again");
        assert_eq!(reread.output_path, b"/data/db/job");
        assert_eq!(reread.output_files, result.output_files);
        let before = RESULT.len() - 2 * result.output_path.len();
        assert_eq!(moved.len() - 2 * b"/data/db/job".len(), before);
    }

    #[test]
    fn refuses_what_is_not_a_whole_result() {
        assert!(CompactionResult::parse(b"").is_none());
        assert!(CompactionResult::parse(b"garbage that is not a result").is_none());
        for cut in [10, 100, 1000, RESULT.len() / 2, RESULT.len() - 3] {
            assert!(
                CompactionResult::parse(&RESULT[..cut]).is_none(),
                "cut at {cut}"
            );
        }
        let mut other_version = RESULT.to_vec();
        other_version[0] = 2;
        assert!(CompactionResult::parse(&other_version).is_none());
        let bad_code = "status={code=x};output_path=;output_files=";
        assert!(CompactionResult::parse(&serialized(bad_code)).is_none());
        let odd_hex = "status={code=0};output_path=ABC;output_files=";
        assert!(CompactionResult::parse(&serialized(odd_hex)).is_none());
        // What RocksDB would read otherwise: a field given twice, spaces around a name.
        let twice = "status={code=0};output_path=;output_files=;output_files=;";
        assert!(CompactionResult::parse(&serialized(twice)).is_none());
        let spaced = "status={code=0};output_path=; output_files=";
        assert!(CompactionResult::parse(&serialized(spaced)).is_none());
        let deep = format!(
            "status={{code=0}};output_path=;output_files={}{}",
            "{".repeat(100),
            "}".repeat(100)
        );
        assert!(CompactionResult::parse(&serialized(&deep)).is_none());
    }

    #[test]
    fn reads_the_input_files() {
        assert_eq!(
            input_files(INPUT).expect("parses"),
            ["000041.sst", "000039.sst", "000036.sst", "000034.sst"]
        );
        assert_eq!(input_family(INPUT).as_deref(), Some("meta"));
        assert_eq!(input_files(&serialized("input_files=;")), Some(Vec::new()));
        assert_eq!(input_files(&serialized("cf_name=6D657461;")), None);
    }
}
