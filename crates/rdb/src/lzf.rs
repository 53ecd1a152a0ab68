//! LZF, the compression RDB strings may use (liblzf's format): a control byte below 32 starts
//! a run of that many plus one literal bytes; any other is a back reference of length
//! `ctrl >> 5` (7 means "plus the next byte") plus two, at distance `(ctrl & 31) << 8 | next`
//! plus one.

/// The longest back reference: 7 + 255 + 2 bytes.
const MAX_MATCH: usize = 264;
/// The farthest back reference.
const MAX_OFFSET: usize = 8192;
const MAX_LITERALS: usize = 32;
const HASH_BITS: u32 = 14;

/// The most an LZF byte can expand to: a 3-byte reference of 264 bytes.
const MAX_RATIO: usize = MAX_MATCH / 3 + 1;

/// Decompresses `input`, which must expand to exactly `len` bytes; a `len` that `input`
/// cannot reach is refused before anything is reserved for it.
pub fn decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    if len > input.len().saturating_mul(MAX_RATIO) {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = input.get(ip..ip + ctrl + 1)?;
            if out.len() + run.len() > len {
                return None;
            }
            out.extend_from_slice(run);
            ip += run.len();
        } else {
            let mut count = ctrl >> 5;
            if count == 7 {
                count += *input.get(ip)? as usize;
                ip += 1;
            }
            let distance = ((ctrl & 31) << 8 | *input.get(ip)? as usize) + 1;
            ip += 1;
            count += 2;
            if distance > out.len() || out.len() + count > len {
                return None;
            }
            // Byte by byte: the reference may overlap what it produces.
            let from = out.len() - distance;
            for i in 0..count {
                out.push(out[from + i]);
            }
        }
    }
    (out.len() == len).then_some(out)
}

/// Compresses `input`; `None` unless that saves at least four bytes, as Redis requires
/// before it stores a string compressed.
pub fn compress(input: &[u8]) -> Option<Vec<u8>> {
    let limit = input.len().checked_sub(4)?;
    let mut out = Vec::with_capacity(limit);
    // On the stack: a 64 KB table from the allocator was fresh pages for nearly every value,
    // and their faults took a third of a slot migration's CPU (perf).
    let mut table = [0u32; 1 << HASH_BITS];
    let (mut ip, mut literals) = (0, 0);
    while ip + 2 < input.len() {
        let slot = hash(&input[ip..ip + 3]);
        let candidate = table[slot] as usize;
        table[slot] = ip as u32 + 1;
        if candidate > 0 {
            let from = candidate - 1;
            let distance = ip - from;
            if distance <= MAX_OFFSET && input[from..from + 3] == input[ip..ip + 3] {
                let longest = (input.len() - ip).min(MAX_MATCH);
                let mut len = 3;
                while len < longest && input[from + len] == input[ip + len] {
                    len += 1;
                }
                push_literals(&mut out, &input[literals..ip]);
                let (count, offset) = (len - 2, distance - 1);
                if count < 7 {
                    out.push((offset >> 8) as u8 | (count as u8) << 5);
                } else {
                    out.push((offset >> 8) as u8 | 7 << 5);
                    out.push((count - 7) as u8);
                }
                out.push(offset as u8);
                ip += len;
                literals = ip;
                if out.len() > limit {
                    return None;
                }
                continue;
            }
        }
        ip += 1;
    }
    push_literals(&mut out, &input[literals..]);
    (out.len() <= limit).then_some(out)
}

fn hash(three: &[u8]) -> usize {
    let v = (three[0] as u32) << 16 | (three[1] as u32) << 8 | three[2] as u32;
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

fn push_literals(out: &mut Vec<u8>, literals: &[u8]) {
    for run in literals.chunks(MAX_LITERALS) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Vec<u8>> {
        let mut pseudo = 12345u32;
        let noise: Vec<u8> = (0..5000)
            .map(|_| {
                pseudo = pseudo.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (pseudo >> 16) as u8
            })
            .collect();
        vec![
            vec![b'a'; 1000],
            b"abcabcabcabcabcabcabcabcabcabc hello hello hello".to_vec(),
            (0..20000u32).map(|i| (i % 251) as u8).collect(),
            [noise.clone(), noise.clone()].concat(),
            b"x".repeat(300),
        ]
    }

    #[test]
    fn compressed_data_decompresses_to_itself() {
        for sample in samples() {
            let packed = compress(&sample).expect("compressible");
            assert!(packed.len() < sample.len());
            assert_eq!(
                decompress(&packed, sample.len()).as_deref(),
                Some(&sample[..])
            );
        }
    }

    #[test]
    fn incompressible_data_is_left_alone() {
        assert_eq!(compress(b"abcdefgh"), None);
        assert_eq!(compress(b""), None);
    }

    #[test]
    fn a_reference_may_overlap_what_it_produces() {
        // One literal, 48 bytes copied from distance 1, one literal.
        let packed = [0x00, b'a', 0xe0, 0x27, 0x00, 0x00, b'a'];
        assert_eq!(decompress(&packed, 50), Some(vec![b'a'; 50]));
    }

    #[test]
    fn bad_input_is_refused_not_a_panic() {
        assert_eq!(decompress(&[0x05, b'a'], 6), None); // literal run past the end
        assert_eq!(decompress(&[0x20, 0x05], 3), None); // reference before the start
        assert_eq!(decompress(&[0x00, b'a', 0x20, 0x00], 2), None); // longer than said
        assert_eq!(decompress(&[0x00, b'a'], 2), None); // shorter than said
        assert_eq!(decompress(&[0xe0], 9), None);
        assert_eq!(decompress(&[0x00, b'a'], usize::MAX), None); // claims more than it can hold
    }
}
