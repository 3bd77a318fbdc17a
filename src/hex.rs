//! Bytes as lowercase hex digits: digests, IDs and nonces, one encoder for the whole crate.

/// `bytes` as two lowercase hex digits each (`[0xab, 0x01]` → `"ab01"`).
pub fn encode(bytes: impl AsRef<[u8]>) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let bytes = bytes.as_ref();
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_two_lowercase_digits() {
        assert_eq!(encode([]), "");
        assert_eq!(encode([0x00, 0x01, 0x7f, 0x80, 0xab, 0xff]), "00017f80abff");
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(encode(&all), expected);
    }
}
